// skylease dashboard, a run's page: while the run is running, its live part ([data-run-live]) is
// fetched again every data-every ms and swapped in; it stops once the server says the run no longer
// runs (X-Run-Running: 0) or on an error (the session ended, the server went away).
"use strict";
(() => {
  const live = document.querySelector("[data-run-live]");
  if (!live) return;
  const every = Math.max(1000, Number(live.dataset.every) || 2000);
  const timer = setInterval(async () => {
    try {
      const r = await fetch(live.dataset.runLive, { credentials: "same-origin", redirect: "error" });
      if (!r.ok) throw new Error(String(r.status));
      live.innerHTML = await r.text();
      if (r.headers.get("X-Run-Running") !== "1") clearInterval(timer);
    } catch (err) {
      clearInterval(timer);
    }
  }, every);
})();
