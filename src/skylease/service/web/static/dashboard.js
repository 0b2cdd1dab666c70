// skylease dashboard: asks before a form with data-confirm (a lease's Cancel button) is sent (the
// Gantt chart is gantt.js).
"use strict";
document.addEventListener("submit", (event) => {
  const text = event.target.dataset && event.target.dataset.confirm;
  if (text && !window.confirm(text)) event.preventDefault();
});

// A live part of a page (the bags' table, a running bag's figures): an element with data-live (the
// URL of its fragment), data-events (its server-sent event stream) and data-version (the changes
// counter it was rendered at). On each "change" event the fragment is fetched again and swapped in,
// at most once per THROTTLE_MS (changes meanwhile make one more fetch after it); a change between
// the render and the stream's start is caught by the "hello" event's version. A bag's or a run's
// page stops listening once the server says it no longer runs (X-Live-Running: 0); an error of the
// fetch (the session ended) closes the stream; a 503 (a part of the server stopped) reloads the page,
// which then says why. An opened <details> with an id stays open.
// window.skyleaseLive counts events and swaps (for tests).
(() => {
  const THROTTLE_MS = 500;
  const live = document.querySelector("[data-live][data-events]");
  if (!live || !window.EventSource) return;
  const state = window.skyleaseLive = { changes: 0, updates: 0 };
  const source = new EventSource(live.dataset.events);
  let busy = false, again = false;
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const r = await fetch(live.dataset.live, { credentials: "same-origin", redirect: "error" });
      if (r.status === 503) { source.close(); location.reload(); return; }
      if (!r.ok) throw new Error(String(r.status));
      // (a disclosure the reader opened stays open across the swap)
      const open = Array.from(live.querySelectorAll("details[open][id]"), (d) => d.id);
      live.innerHTML = await r.text();
      for (const id of open) { const d = document.getElementById(id); if (d) d.open = true; }
      state.updates += 1;
      if (r.headers.get("X-Live-Running") === "0") { source.close(); again = false; }
    } catch (err) {
      source.close();
      again = false;
    }
    setTimeout(() => { busy = false; if (again) { again = false; refresh(); } }, THROTTLE_MS);
  }
  source.addEventListener("hello", (event) => {
    if (Number(event.data) !== Number(live.dataset.version)) refresh();
  });
  source.addEventListener("change", (event) => {
    state.changes += 1;
    try { live.dataset.version = JSON.parse(event.data).version; } catch (err) { /* kept */ }
    refresh();
  });
  window.addEventListener("pagehide", () => source.close());
})();
