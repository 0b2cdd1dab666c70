// skylease dashboard: asks before a form with data-confirm (a lease's Cancel button) is sent (the
// Gantt chart is gantt.js).
"use strict";
document.addEventListener("submit", (event) => {
  const text = event.target.dataset && event.target.dataset.confirm;
  if (text && !window.confirm(text)) event.preventDefault();
});

// A running bag's page: its live part (#live, data-refresh) is fetched again every data-every ms
// and swapped in; it stops once the server says the bag no longer runs (X-Bag-Running: 0) or on
// an error (the session ended, the server went away).
(() => {
  const live = document.querySelector("[data-refresh]");
  if (!live) return;
  const every = Math.max(1000, Number(live.dataset.every) || 2000);
  const timer = setInterval(async () => {
    try {
      const r = await fetch(live.dataset.refresh, { credentials: "same-origin", redirect: "error" });
      if (!r.ok) throw new Error(String(r.status));
      live.innerHTML = await r.text();
      if (r.headers.get("X-Bag-Running") !== "1") clearInterval(timer);
    } catch (err) {
      clearInterval(timer);
    }
  }, every);
})();
