// A bar chart as inline SVG, drawn here (no chart library): one bar per day, the height its cost,
// a tooltip (<title>) with the day's numbers. It is drawn at the width it is shown at (one SVG
// unit is one CSS pixel), so its labels keep their size on a phone; the days are labelled as
// often as their labels fit side by side, the last (today) always. Sizes are attributes, so no
// inline style is needed.
const SVG = "http://www.w3.org/2000/svg";
const HEIGHT = 200;
/** The labels' size in pixels (the stylesheet's `.chart text` says the same). */
export const LABEL_PX = 12;
/** A generous width per character of a label, for laying them out before they are measured. */
const CHAR_PX = LABEL_PX * 0.65;
const PAD = { top: 12, right: 8, bottom: 24 };

function svg(tag, attributes = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

/**
 * `points`: [{label, value, title}] in order; `formatValue` labels the axis; `width`: the width
 * in CSS pixels it is shown at (the container's).
 */
export function barChart(points, { formatValue, label, width = 600 }) {
  const WIDTH = Math.max(Math.round(width), 200);
  const chart = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    width: WIDTH,
    height: HEIGHT,
    class: "chart",
    role: "img",
    "aria-label": label,
  });
  const max = Math.max(...points.map((point) => point.value), 0);
  const top = max > 0 ? max : 1;
  const axisLabels = [formatValue(max), formatValue(0)];
  // The axis's labels end 4 px left of the plot, and start inside the chart.
  const left = Math.ceil(Math.max(...axisLabels.map((text) => text.length)) * CHAR_PX) + 8;
  const plotWidth = WIDTH - left - PAD.right;
  const plotHeight = HEIGHT - PAD.top - PAD.bottom;
  const step = plotWidth / Math.max(points.length, 1);
  const barWidth = Math.max(1, step * 0.7);
  chart.append(
    svg("line", {
      class: "axis",
      x1: left,
      y1: PAD.top + plotHeight,
      x2: WIDTH - PAD.right,
      y2: PAD.top + plotHeight,
    }),
    svg("text", { x: left - 4, y: PAD.top + LABEL_PX - 2, "text-anchor": "end" }, axisLabels[0]),
    svg("text", { x: left - 4, y: PAD.top + plotHeight, "text-anchor": "end" }, axisLabels[1]),
  );
  // Every `every`-th day is labelled ("MM-DD"), so that two labels never touch, and the last.
  const labelWidth = 5 * CHAR_PX + 8;
  const every = Math.max(1, Math.ceil(labelWidth / step));
  const last = points.length - 1;
  points.forEach((point, index) => {
    const height = (point.value / top) * plotHeight;
    const x = left + index * step + (step - barWidth) / 2;
    const bar = svg("rect", {
      class: "bar",
      x: x.toFixed(2),
      y: (PAD.top + plotHeight - height).toFixed(2),
      width: barWidth.toFixed(2),
      height: Math.max(height, point.value > 0 ? 1 : 0).toFixed(2),
      "data-day": point.label,
    });
    bar.append(svg("title", {}, point.title));
    chart.append(bar);
    // The last is labelled; a regular one too close before it is not.
    const labelled = index === last || (index % every === 0 && (last - index) * step >= labelWidth);
    if (!labelled) return;
    // Kept inside the chart at both ends.
    const centre = Math.min(Math.max(x + barWidth / 2, labelWidth / 2), WIDTH - labelWidth / 2);
    chart.append(
      svg(
        "text",
        { class: "day", x: centre.toFixed(2), y: HEIGHT - 6, "text-anchor": "middle" },
        point.label.slice(5),
      ),
    );
  });
  return chart;
}
