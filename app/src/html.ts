/** Text as HTML text content: `&`, `<` and `>` escaped (enough between tags, not in attributes). */
export function escapeHtml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** Text as an HTML attribute's value between double quotes. */
export function escapeAttribute(text: string): string {
  return escapeHtml(text).replace(/"/g, "&quot;");
}
