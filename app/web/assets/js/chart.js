// A bar chart as inline SVG, drawn here (no chart library): one bar per day, the height its cost,
// a tooltip (<title>) with the day's numbers. Sizes are attributes, so no inline style is needed.
const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 600;
const HEIGHT = 200;
const PAD = { top: 10, right: 8, bottom: 22, left: 44 };

function svg(tag, attributes = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

/** `points`: [{label, value, title}] in order; `formatValue` labels the axis. */
export function barChart(points, { formatValue, label }) {
  const chart = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    class: "chart",
    role: "img",
    "aria-label": label,
  });
  const max = Math.max(...points.map((point) => point.value), 0);
  const top = max > 0 ? max : 1;
  const plotWidth = WIDTH - PAD.left - PAD.right;
  const plotHeight = HEIGHT - PAD.top - PAD.bottom;
  const step = plotWidth / Math.max(points.length, 1);
  const barWidth = Math.max(1, step * 0.7);
  chart.append(
    svg("line", {
      class: "axis",
      x1: PAD.left,
      y1: PAD.top + plotHeight,
      x2: WIDTH - PAD.right,
      y2: PAD.top + plotHeight,
    }),
    svg("text", { x: PAD.left - 4, y: PAD.top + 8, "text-anchor": "end" }, formatValue(max)),
    svg("text", { x: PAD.left - 4, y: PAD.top + plotHeight, "text-anchor": "end" }, formatValue(0)),
  );
  points.forEach((point, index) => {
    const height = (point.value / top) * plotHeight;
    const x = PAD.left + index * step + (step - barWidth) / 2;
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
    // Every fifth day is labelled, and the last (today).
    if (index % 5 === 0 || index === points.length - 1)
      chart.append(
        svg(
          "text",
          { x: (x + barWidth / 2).toFixed(2), y: HEIGHT - 6, "text-anchor": "middle" },
          point.label.slice(5),
        ),
      );
  });
  return chart;
}
