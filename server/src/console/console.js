// Live updates: follow /ui/events and, on each change, fetch this page again and swap in
// its <main>; between changes, keep every "how long ago" (<time class="age">) current. The
// page reads the same without this script.
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

  // As the server words it (pages.rs, `ago`): the largest whole unit.
  function ago(datetime) {
    const then = Date.parse(datetime);
    if (Number.isNaN(then)) return null;
    const s = Math.max(0, Math.floor((Date.now() - then) / 1000));
    if (s < 60) return s + "s ago";
    if (s < 3600) return Math.floor(s / 60) + "m ago";
    if (s < 86400) return Math.floor(s / 3600) + "h ago";
    return Math.floor(s / 86400) + "d ago";
  }

  function tick() {
    for (const time of document.querySelectorAll("time.age[datetime]")) {
      const text = ago(time.getAttribute("datetime"));
      if (text !== null && time.textContent !== text) time.textContent = text;
    }
  }
  setInterval(tick, 1000);

  const events = new EventSource("/ui/events");
  events.addEventListener("open", () => mark("live"));
  events.addEventListener("error", () => mark("offline"));
  events.addEventListener("change", refresh);
})();
