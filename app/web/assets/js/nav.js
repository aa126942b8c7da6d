// The main navigation: marks the current page (the layout is shared, so the server cannot), and
// on a narrow screen opens and closes the list with the Menu button (closed again by Escape, a
// click elsewhere or following a link).
const here = location.pathname.replace(/(.)\/+$/, "$1");
for (const link of document.querySelectorAll(".topbar nav a")) {
  if (new URL(link.href).pathname === here) link.setAttribute("aria-current", "page");
}

const topbar = document.querySelector(".topbar");
const toggle = topbar?.querySelector(".menu-toggle");
if (topbar && toggle) {
  const setOpen = (open) => {
    toggle.setAttribute("aria-expanded", String(open));
    topbar.classList.toggle("open", open);
  };
  toggle.addEventListener("click", () => setOpen(toggle.getAttribute("aria-expanded") !== "true"));
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && topbar.classList.contains("open")) {
      setOpen(false);
      toggle.focus();
    }
  });
  document.addEventListener("click", (event) => {
    if (!topbar.contains(event.target)) setOpen(false);
  });
}
