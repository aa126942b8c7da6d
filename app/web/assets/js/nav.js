// Marks the current page in the main navigation (the layout is shared, so the server cannot).
const here = location.pathname.replace(/(.)\/+$/, "$1");
for (const link of document.querySelectorAll(".topbar nav a")) {
  if (new URL(link.href).pathname === here) link.setAttribute("aria-current", "page");
}
