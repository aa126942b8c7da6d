// The usage page: how much of each budget is spent, cost per day for the last 30 days (chart.js),
// and cost and tokens per source, per plugin and per turn, from GET /api/usage.
import { api } from "./lib/api.js";
import { byId, el, fill, showError } from "./lib/dom.js";
import { formatDateTime, formatInteger, formatUsd } from "./lib/format.js";
import { barChart } from "./chart.js";

const TOKEN_COLUMNS = [
  ["inputTokens", "In"],
  ["outputTokens", "Out"],
  ["cacheReadTokens", "Cache read"],
  ["cacheWriteTokens", "Cache write"],
];

function budgetCard(name, { limitUsd, spentUsd }) {
  const over = limitUsd !== null && spentUsd >= limitUsd;
  return el(
    "section",
    { class: "card", "data-budget": name },
    el("h2", { text: `${name === "daily" ? "Today" : "This month"}` }),
    el(
      "p",
      {},
      el("strong", { class: over ? "bad" : "", text: formatUsd(spentUsd) }),
      limitUsd === null ? " spent, no budget set" : ` of ${formatUsd(limitUsd)} ${name} budget`,
    ),
    limitUsd === null
      ? null
      : el("meter", {
          min: "0",
          max: String(limitUsd),
          value: String(Math.min(spentUsd, limitUsd)),
          high: String(limitUsd * 0.8),
          optimum: "0",
        }),
    over ? el("p", { class: "bad", text: "Used up: model calls are refused until it resets." }) : null,
  );
}

/**
 * A table of rows: the `first` columns' text ([key, label, format?, numeric?]), the cost, their
 * numbers, then the tokens. The cost comes right after what names the row so a phone (or a
 * half-width card) shows it without scrolling the table sideways.
 */
function totalsTable(table, rows, first) {
  const columns = [
    ...first.filter((column) => !column[3]),
    ["costUsd", "Cost", formatUsd, true],
    ...first.filter((column) => column[3]),
    ...TOKEN_COLUMNS.map(([key, label]) => [key, label, formatInteger, true]),
  ];
  fill(
    table,
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        columns.map(([, label, , numeric]) =>
          el("th", { scope: "col", class: numeric ? "num" : undefined, text: label }),
        ),
      ),
    ),
    el(
      "tbody",
      {},
      rows.length === 0
        ? el("tr", {}, el("td", { colspan: String(columns.length), class: "muted", text: "Nothing yet." }))
        : rows.map((row) =>
            el(
              "tr",
              {},
              columns.map(([key, , format, numeric]) =>
                el("td", {
                  class: numeric ? "num" : undefined,
                  text: format ? format(row[key]) : (row[key] ?? "—"),
                }),
              ),
            ),
          ),
    ),
  );
}

/** Drawn at the width it is shown at, and again when that changes (a phone turned). */
function drawChart(points) {
  const box = byId("chart");
  let drawnAt = 0;
  const draw = () => {
    const width = Math.floor(box.clientWidth);
    if (width === drawnAt || width === 0) return;
    drawnAt = width;
    fill(
      box,
      barChart(points, { formatValue: formatUsd, label: "Cost per day over the last 30 days", width }),
    );
  };
  draw();
  new ResizeObserver(draw).observe(box);
}

function show(usage) {
  if (usage.model && !usage.model.priced) {
    const note = byId("unpriced");
    note.textContent =
      `Your model (${usage.model.id}) has no price: pi-ai does not list it and config.toml sets no cost, ` +
      "so its calls count as $0.00 here and no budget stops them. That is right for a model on your own " +
      "machine; for a paid service, set cost in config.toml (US dollars per million tokens) to count it.";
    note.hidden = false;
  }
  fill(
    byId("budgets"),
    budgetCard("daily", usage.budgets.daily),
    budgetCard("monthly", usage.budgets.monthly),
  );
  const points = usage.days.map((day) => ({
    label: day.day,
    value: day.costUsd,
    title: `${day.day}: ${formatUsd(day.costUsd)}, ${formatInteger(day.turns)} turns, ${formatInteger(day.inputTokens)} in / ${formatInteger(day.outputTokens)} out tokens`,
  }));
  drawChart(points);
  const total = usage.days.reduce((sum, day) => sum + day.costUsd, 0);
  byId("chart-total").textContent = `${formatUsd(total)} in 30 days.`;
  const turnsColumn = ["turns", "Turns", formatInteger, true];
  totalsTable(byId("by-source"), usage.bySource, [["source", "Source"], turnsColumn]);
  totalsTable(byId("by-plugin"), usage.byPlugin, [["plugin", "Plugin"], turnsColumn]);
  const turns = usage.turns.map((turn) => ({
    ...turn,
    when: formatDateTime(turn.at),
    from: turn.plugin ? `${turn.source ?? ""} (${turn.plugin})` : (turn.source ?? "cli"),
  }));
  totalsTable(byId("turns"), turns, [
    ["when", "When"],
    ["from", "Source"],
    ["calls", "Calls", formatInteger, true],
  ]);
}

try {
  show(await api("/api/usage"));
} catch (error) {
  showError(
    byId("usage-error"),
    error.status === 404 ? "Usage is not recorded by this version of the app." : error,
  );
}
