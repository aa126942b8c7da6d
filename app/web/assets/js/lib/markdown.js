// Markdown for the assistant's replies, with marked served by the app itself. The reply is text
// from a model that reads untrusted input, so raw HTML in it is shown as text, links keep only
// http, https and mailto addresses, and images are not loaded (their text or address is shown).
import { Marked } from "/assets/vendor/marked.esm.js";

const SAFE_ADDRESS = /^(https?:|mailto:)/i;
const ENTITIES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (char) => ENTITIES[char]);

const marked = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    html({ text }) {
      return escapeHtml(text);
    },
    link({ href, title, tokens }) {
      const label = this.parser.parseInline(tokens);
      const address = String(href ?? "").trim();
      if (!SAFE_ADDRESS.test(address)) return label;
      const titled = title ? ` title="${escapeHtml(title)}"` : "";
      return `<a href="${escapeHtml(address)}"${titled} rel="noopener noreferrer" target="_blank">${label}</a>`;
    },
    image({ href, text }) {
      const address = String(href ?? "").trim();
      const label = escapeHtml(text || address);
      if (!SAFE_ADDRESS.test(address)) return label;
      return `<a href="${escapeHtml(address)}" rel="noopener noreferrer" target="_blank">${label}</a>`;
    },
  },
});

/** The Markdown as a fragment to put into the page. */
export function renderMarkdown(text) {
  const template = document.createElement("template");
  template.innerHTML = marked.parse(String(text), { async: false });
  return template.content;
}
