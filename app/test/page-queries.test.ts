import { describe, expect, it } from "vitest";
import { basicAuthHeader } from "@stavrobot/common";
import { textTurn, toolTurn } from "@stavrobot/common/test-support";
import { PASSWORD, chat, useTestApp } from "./helpers/app.js";

const t = useTestApp();
const auth = { Authorization: basicAuthHeader(PASSWORD) };

/** Has the model call manage_pages once; returns what the tool answered. */
async function managePages(input: Record<string, unknown>): Promise<string> {
  t.fake.enqueue(toolTurn("manage_pages", input), textTurn("ok"));
  const before = t.fake.requests.length;
  expect((await chat(t.app, "please use manage_pages")).status).toBe(200);
  return t.fake.requests[before + 1]?.lastUserText ?? "";
}

async function pageQuery(path: string, name: string, search = ""): Promise<unknown> {
  const response = await fetch(`http://127.0.0.1:${t.app.port}/api/pages/${path}/queries/${name}${search}`, {
    headers: auth,
  });
  expect(response.status, await response.clone().text()).toBe(200);
  return response.json();
}

describe("page query values", () => {
  it("answers numbers as JSON numbers, so a page can add them up", async () => {
    await t.app.db.query("CREATE TABLE expenses (id serial PRIMARY KEY, label text, amount numeric(10, 2))");
    await t.app.db.query(
      "INSERT INTO expenses (label, amount) VALUES ('rent', 40.00), ('food', 12.50), ('bus', 7.25)",
    );
    expect(
      await managePages({
        action: "upsert",
        path: "budget",
        content: "<p>budget</p>",
        mimetype: "text/html",
        queries: {
          items: "SELECT label, amount, id::int8 AS id FROM expenses ORDER BY id",
          total: "SELECT sum(amount) AS total, count(*) AS n, avg(amount)::float8 AS mean FROM expenses",
        },
      }),
    ).toBe("Page created at /pages/budget");
    const items = (await pageQuery("budget", "items")) as { label: string; amount: unknown; id: unknown }[];
    expect(items).toEqual([
      { label: "rent", amount: 40, id: 1 },
      { label: "food", amount: 12.5, id: 2 },
      { label: "bus", amount: 7.25, id: 3 },
    ]);
    // What the page's script did: before, "0" + "40.00" + "12.50" + "7.25".
    expect(items.reduce((sum, row) => sum + (row.amount as number), 0)).toBe(59.75);
    expect(await pageQuery("budget", "total")).toEqual([{ total: 59.75, n: 3, mean: 19.916666666666668 }]);
  });

  it("keeps every digit: a value a JSON number cannot hold exactly stays PostgreSQL's text", async () => {
    expect(
      await managePages({
        action: "upsert",
        path: "precise",
        content: "<p>precise</p>",
        mimetype: "text/html",
        queries: {
          values: `SELECT 9007199254740993::int8 AS big, 9007199254740992::int8 AS fits,
                     -42::int8 AS negative, 12345678901234567890.12::numeric AS huge, 0.1::numeric AS tenth,
                     1e-30::numeric AS tiny, 'NaN'::numeric AS nan, 'Infinity'::float8 AS inf,
                     1.5::float4 AS single, 2::int2 AS small, NULL::numeric AS nothing,
                     ARRAY[1.5, NULL, 12345678901234567890.12]::numeric[] AS list,
                     ARRAY[[1, 2], [3, 9007199254740993]]::int8[] AS grid,
                     '$2.50'::money AS price, 'text'::text AS label`,
        },
      }),
    ).toBe("Page created at /pages/precise");
    expect(await pageQuery("precise", "values")).toEqual([
      {
        big: "9007199254740993",
        fits: 9007199254740992,
        negative: -42,
        huge: "12345678901234567890.12",
        tenth: 0.1,
        tiny: 1e-30,
        nan: "NaN",
        inf: "Infinity",
        single: 1.5,
        small: 2,
        nothing: null,
        list: [1.5, null, "12345678901234567890.12"],
        grid: [
          [1, 2],
          [3, "9007199254740993"],
        ],
        price: "$2.50",
        label: "text",
      },
    ]);
  });
});

describe("$param placeholders inside quotes", () => {
  it("are refused when the page is saved, naming the query and saying how to write it", async () => {
    for (const [sql, name] of [
      ["SELECT * FROM expenses WHERE label ILIKE '%$param:q%'", "q"],
      ["SELECT * FROM expenses WHERE id > 0 AND label = E'$param:label'", "label"],
      ['SELECT 1 AS "$param:column"', "column"],
      ["SELECT $$ $param:body $$ AS x", "body"],
    ] as const) {
      const answer = await managePages({
        action: "upsert",
        path: "search",
        content: "<p>search</p>",
        mimetype: "text/html",
        queries: { fine: "SELECT 1 AS one", matching: sql },
      });
      expect(answer, sql).toContain(`Query "matching": $param:${name} is inside quotes`);
      expect(answer, sql).toContain(`'%' || $param:${name} || '%'`);
    }
    // Nothing was saved.
    const saved = await t.app.db.query("SELECT 1 FROM pages WHERE path = 'search'");
    expect(saved.rows).toEqual([]);

    // Written outside the quotes, it is filled in.
    expect(
      await managePages({
        action: "upsert",
        path: "search",
        content: "<p>search</p>",
        mimetype: "text/html",
        queries: { matching: "SELECT label FROM expenses WHERE label ILIKE '%' || $param:q || '%'" },
      }),
    ).toBe("Page created at /pages/search");
    expect(await pageQuery("search", "matching", "?q=ent")).toEqual([{ label: "rent" }]);
  });

  it("in a page saved before the check, make its query fail saying why", async () => {
    await t.app.db.query(
      "INSERT INTO pages (path, mimetype, data, is_public, queries) VALUES ('old', 'text/html', 'x', false, $1)",
      [JSON.stringify({ q: "SELECT label FROM expenses WHERE label = '$param:label'" })],
    );
    const response = await fetch(`http://127.0.0.1:${t.app.port}/api/pages/old/queries/q?label=rent`, {
      headers: auth,
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: string }).error).toContain(
      "$param:label is inside quotes, where it is not filled in",
    );
  });
});
