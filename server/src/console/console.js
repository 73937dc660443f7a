// Live updates: follow /ui/events and, on each change, fetch this page again and swap in
// its <main>. The page reads the same without this script.
"use strict";
(function () {
  const badge = document.getElementById("live");
  let fetching = false;
  let again = false;

  function mark(state) {
    badge.dataset.state = state;
    badge.textContent = state;
  }

  async function refresh() {
    if (fetching) { again = true; return; }
    fetching = true;
    try {
      const response = await fetch(location.href, { cache: "no-store" });
      if (response.ok) {
        const page = new DOMParser().parseFromString(await response.text(), "text/html");
        const fresh = page.querySelector("main");
        if (fresh) {
          document.querySelector("main").innerHTML = fresh.innerHTML;
          document.body.dataset.updated = String(Date.now());
        }
      }
    } finally {
      fetching = false;
      if (again) { again = false; refresh(); }
    }
  }

  const events = new EventSource("/ui/events");
  events.addEventListener("open", () => mark("live"));
  events.addEventListener("error", () => mark("offline"));
  events.addEventListener("change", refresh);
})();
