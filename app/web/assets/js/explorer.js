// The read-only database explorer: tables (a list, or a select on a phone), a paged grid sorted by
// clicking a column, and a row's values in a dialog, long text and JSON readable in full.
import { api } from "./lib/api.js";
import { byId, el, fill, showError } from "./lib/dom.js";
import { formatInteger } from "./lib/format.js";

const PAGE_SIZE = 50;
const CELL_CHARS = 120;
const view = { table: undefined, offset: 0, orderBy: undefined, direction: "asc", page: undefined };
const tablePath = (name) => `/api/explorer/tables/${encodeURIComponent(name)}`;

/** A value as text: JSON pretty-printed in the detail, on one line in the grid. */
function asText(value, pretty) {
  if (value === null) return null;
  if (typeof value === "object") return JSON.stringify(value, null, pretty ? 2 : undefined);
  return String(value);
}

async function loadTables() {
  const tables = await api("/api/explorer/tables");
  fill(
    byId("tables"),
    tables.map((table) =>
      el(
        "li",
        {},
        el(
          "button",
          {
            type: "button",
            "data-table": table.name,
            on: { click: () => run(() => selectTable(table.name)) },
          },
          el("span", { text: table.name }),
          el("span", { class: "muted small", text: formatInteger(table.rowCount) }),
        ),
      ),
    ),
  );
  fill(
    byId("table-select"),
    el("option", { value: "", text: "Choose a table…" }),
    tables.map((table) =>
      el("option", { value: table.name, text: `${table.name} (${formatInteger(table.rowCount)})` }),
    ),
  );
  return tables;
}

async function selectTable(name) {
  Object.assign(view, { table: name, offset: 0, orderBy: undefined, direction: "asc" });
  const url = new URL(location.href);
  url.searchParams.set("table", name);
  history.replaceState(null, "", url);
  for (const button of byId("tables").querySelectorAll("button"))
    button.setAttribute("aria-current", String(button.dataset.table === name));
  byId("table-select").value = name;
  const schema = await api(tablePath(name));
  byId("schema-summary").textContent = `${schema.columns.length} columns`;
  fill(
    byId("schema"),
    schema.columns.map((column) =>
      el(
        "li",
        {},
        el("strong", { text: column.name }),
        el("span", { class: "muted", text: `${column.type}${column.nullable ? ", nullable" : ""}` }),
      ),
    ),
  );
  await loadRows();
}

async function loadRows() {
  const query = new URLSearchParams({
    limit: String(PAGE_SIZE),
    offset: String(view.offset),
    orderDirection: view.direction,
  });
  if (view.orderBy) query.set("orderBy", view.orderBy);
  const page = await api(`${tablePath(view.table)}/rows?${query}`);
  view.page = page;
  byId("table-title").textContent = view.table;
  byId("table-view").hidden = false;
  byId("table-empty").hidden = true;
  const sortedBy = view.orderBy ?? page.columns[0];
  fill(
    byId("grid-head"),
    page.columns.map((column) =>
      el(
        "th",
        {
          scope: "col",
          "aria-sort": column === sortedBy ? (view.direction === "asc" ? "ascending" : "descending") : "none",
        },
        el(
          "button",
          { type: "button", "data-column": column, on: { click: () => sortBy(column) } },
          column,
          column === sortedBy ? (view.direction === "asc" ? " ▲" : " ▼") : "",
        ),
      ),
    ),
  );
  fill(
    byId("grid-body"),
    page.rows.length === 0
      ? el("tr", {}, el("td", { colspan: String(page.columns.length), class: "muted", text: "No rows." }))
      : page.rows.map((row, index) =>
          el(
            "tr",
            {
              class: "clickable",
              tabindex: "0",
              on: {
                click: () => showRow(index),
                keydown: (event) =>
                  (event.key === "Enter" || event.key === " ") && (event.preventDefault(), showRow(index)),
              },
            },
            row.map((value) => {
              const text = asText(value, false);
              if (text === null) return el("td", { class: "null", text: "null" });
              return el("td", {
                title: text.length > CELL_CHARS ? undefined : text,
                text: text.length > CELL_CHARS ? `${text.slice(0, CELL_CHARS)}…` : text,
              });
            }),
          ),
        ),
  );
  const last = Math.min(page.offset + page.rows.length, page.total);
  byId("page-info").textContent =
    page.total === 0
      ? "0 rows"
      : `${formatInteger(page.offset + 1)}–${formatInteger(last)} of ${formatInteger(page.total)}`;
  byId("prev-page").disabled = page.offset === 0;
  byId("next-page").disabled = page.offset + page.limit >= page.total;
}

function sortBy(column) {
  const current = view.orderBy ?? view.page?.columns[0];
  view.direction = current === column && view.direction === "asc" ? "desc" : "asc";
  view.orderBy = column;
  view.offset = 0;
  void run(loadRows);
}

function showRow(index) {
  const { columns, rows } = view.page;
  const row = rows[index];
  byId("row-title").textContent = `${view.table}, row ${view.offset + index + 1}`;
  fill(
    byId("row-detail"),
    columns.flatMap((column, i) => {
      const text = asText(row[i], true);
      return [
        el("dt", { text: column }),
        el("dd", {}, text === null ? el("span", { class: "null", text: "null" }) : el("pre", { text })),
      ];
    }),
  );
  byId("row-dialog").showModal();
}

async function run(action) {
  try {
    await action();
    showError(byId("explorer-error"));
  } catch (error) {
    showError(byId("explorer-error"), error);
  }
}

byId("row-close").addEventListener("click", () => byId("row-dialog").close());
byId("table-select").addEventListener(
  "change",
  (event) => event.target.value && run(() => selectTable(event.target.value)),
);
byId("prev-page").addEventListener("click", () => {
  view.offset = Math.max(0, view.offset - PAGE_SIZE);
  void run(loadRows);
});
byId("next-page").addEventListener("click", () => {
  view.offset += PAGE_SIZE;
  void run(loadRows);
});

await run(async () => {
  const tables = await loadTables();
  const wanted = new URL(location.href).searchParams.get("table");
  if (wanted && tables.some((table) => table.name === wanted)) await selectTable(wanted);
});
