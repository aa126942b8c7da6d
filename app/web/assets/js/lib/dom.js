// Small DOM helpers. Data always goes into the page as text (textContent or attribute values),
// never as markup: the one exception is Markdown, rendered by markdown.js with raw HTML escaped.

/**
 * Builds an element: `el("button", { class: "primary", type: "submit", on: { click } }, "Save")`.
 * Strings among the children become text nodes; `text` sets the text content.
 */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = String(value);
    else if (key === "on")
      for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
    else if (key === "class") node.className = value;
    else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces a node's content with the given children. */
export function fill(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

export function byId(id) {
  const node = document.getElementById(id);
  if (!node) throw new Error(`#${id} is missing from the page`);
  return node;
}

/** Shows an error's message in a node (or clears it when `error` is undefined). */
export function showError(node, error) {
  if (error === undefined) {
    fill(node);
    node.hidden = true;
    return;
  }
  fill(node, error instanceof Error ? error.message : String(error));
  node.hidden = false;
}

/** Runs an action with its button disabled, so a second tap does not send it twice. */
export async function busy(button, action) {
  button.disabled = true;
  try {
    return await action();
  } finally {
    button.disabled = false;
  }
}
