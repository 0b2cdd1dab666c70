// skylease dashboard's Gantt chart: draws the slot table on <canvas id="gantt"> from
// /leases/gantt.json, and keeps the chart and the tables up to date from the server-sent events of
// /events (no library, no CDN). Loaded right after the canvas, not deferred: the chart's data is asked
// for while the browser still parses the (possibly long) tables below it.
"use strict";
(() => {
  const canvas = document.getElementById("gantt");
  if (!canvas) return;
  const only = canvas.dataset.lease ? Number(canvas.dataset.lease) : null;
  // The last model drawn, for tests and the curious: {model, draws, changes, firstRenderMs}.
  const state = (window.skyleaseGantt = { model: null, draws: 0, changes: 0, firstRenderMs: null, migrations: 0 });
  const LANE = 26, LEFT = 90, TOP = 22;

  const colour = (id) => `hsl(${Math.round((id * 137.508) % 360)} 60% 45%)`;
  const patterns = new Map(); // one pattern per colour (thousands of bars share a few hundred)
  function hatch(ctx, fg) {
    if (!patterns.has(fg)) patterns.set(fg, ctx.createPattern(tile(fg), "repeat"));
    return patterns.get(fg);
  }
  function tile(fg) {
    const p = document.createElement("canvas");
    p.width = p.height = 8;
    const c = p.getContext("2d");
    c.strokeStyle = fg; c.lineWidth = 2;
    c.beginPath(); c.moveTo(0, 8); c.lineTo(8, 0); c.moveTo(-2, 2); c.lineTo(2, -2);
    c.moveTo(6, 10); c.lineTo(10, 6); c.stroke();
    return p;
  }

  function draw(model) {
    const leases = only === null ? model.leases : model.leases.filter((l) => l.id === only);
    const lanes = model.nodes.length + 1; // the nodes, then the image transfers
    const width = canvas.clientWidth || canvas.width;
    const ratio = window.devicePixelRatio || 1;
    const height = TOP + lanes * LANE + 8;
    canvas.width = Math.round(width * ratio); canvas.height = Math.round(height * ratio);
    canvas.style.height = height + "px";
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    let t0 = model.now, t1 = model.now + 1;
    for (const l of leases) for (const b of l.bars) { t0 = Math.min(t0, b.start); t1 = Math.max(t1, b.end); }
    t1 += (t1 - t0) * 0.03;
    const x = (t) => LEFT + ((t - t0) / (t1 - t0)) * (width - LEFT - 8);
    const y = (lane) => TOP + lane * LANE;
    ctx.font = "12px system-ui, sans-serif"; ctx.textBaseline = "middle";
    for (let k = 0; k < lanes; k++) {
      ctx.fillStyle = k % 2 ? "#f6f8fb" : "#fff"; ctx.fillRect(LEFT, y(k), width - LEFT, LANE);
      ctx.fillStyle = "#1a1a1a"; ctx.fillText(k < model.nodes.length ? model.nodes[k] : "transfers", 4, y(k) + LANE / 2);
    }
    ctx.fillStyle = "#4a4a4a";
    for (let i = 0; i <= 4; i++) {
      const t = t0 + ((t1 - t0) * i) / 4;
      ctx.fillText(`${Math.round(t)} s`, Math.min(x(t), width - 50), 10);
    }
    const migrations = []; // drawn last, over the bars: an arrow from each node left to its new one
    for (const l of leases) {
      const fg = colour(l.id), ar = l.type === "advance-reservation";
      let suspendedAt = null;
      for (const b of l.bars) {
        if (b.kind === "migrate") { migrations.push([b, fg]); continue; }
        const x0 = x(b.start), w = Math.max(1.5, x(b.end) - x0);
        const lanesOf = b.kind === "transfer" ? [model.nodes.length] : b.nodes;
        ctx.globalAlpha = b.plan ? 0.4 : 1; // the plan ahead: faded, outlined dashed (it may move)
        for (const k of lanesOf) {
          const top = y(k) + 3, h = LANE - 6;
          if (b.kind === "vm") {
            ctx.fillStyle = fg; ctx.fillRect(x0, top, w, h);
            if (ar) { ctx.fillStyle = hatch(ctx, "rgba(255,255,255,.75)"); ctx.fillRect(x0, top, w, h); }
          } else if (b.kind === "transfer") {
            ctx.fillStyle = "#9aa5b1"; ctx.fillRect(x0, top, w, h);
            ctx.strokeStyle = fg; ctx.lineWidth = 2; ctx.strokeRect(x0, top, w, h);
          } else { // suspend, resume, shutdown: the lease's colour, hatched
            ctx.fillStyle = hatch(ctx, fg); ctx.fillRect(x0, top, w, h);
            ctx.strokeStyle = fg; ctx.lineWidth = 1; ctx.strokeRect(x0, top, w, h);
          }
          if (b.plan) {
            ctx.globalAlpha = 1; ctx.setLineDash([5, 3]); ctx.strokeStyle = fg; ctx.lineWidth = 1.5;
            ctx.strokeRect(x0, top, w, h); ctx.setLineDash([]); ctx.globalAlpha = 0.4;
          }
          if (w > 30 && b.kind !== "transfer") {
            ctx.fillStyle = b.kind === "vm" ? "#fff" : "#1a1a1a"; ctx.fillText(String(l.id), x0 + 3, top + h / 2);
          }
        }
        ctx.globalAlpha = 1;
        if (b.kind === "suspend") suspendedAt = b;
        if (b.kind === "resume" && suspendedAt) { // the time spent suspended: a dashed outline
          ctx.setLineDash([4, 3]); ctx.strokeStyle = fg; ctx.lineWidth = 1;
          for (const k of suspendedAt.nodes) ctx.strokeRect(x(suspendedAt.end), y(k) + 5, x(b.start) - x(suspendedAt.end), LANE - 10);
          ctx.setLineDash([]); suspendedAt = null;
        }
      }
    }
    for (const [b, fg] of migrations) {
      const xm = x(b.start);
      b.from.forEach((k, i) => {
        const to = b.nodes[i]; if (to === undefined || to === k) return;
        const y0 = y(k) + LANE / 2, y1 = y(to) + LANE / 2, dir = Math.sign(y1 - y0);
        ctx.strokeStyle = fg; ctx.fillStyle = fg; ctx.lineWidth = 2; ctx.setLineDash([]);
        ctx.beginPath(); ctx.arc(xm, y0, 3, 0, 2 * Math.PI); ctx.fill();
        ctx.beginPath(); ctx.moveTo(xm, y0); ctx.lineTo(xm, y1 - dir * 2); ctx.stroke();
        ctx.beginPath(); ctx.moveTo(xm, y1); ctx.lineTo(xm - 5, y1 - dir * 8); ctx.lineTo(xm + 5, y1 - dir * 8);
        ctx.closePath(); ctx.fill();
      });
    }
    state.migrations = migrations.length;
    ctx.strokeStyle = "#c1121f"; ctx.lineWidth = 2; ctx.beginPath();
    ctx.moveTo(x(model.now), TOP - 4); ctx.lineTo(x(model.now), height); ctx.stroke();
    state.model = model; state.draws += 1;
    if (state.firstRenderMs === null) {
      performance.mark("skylease-gantt-first-render");
      state.firstRenderMs = performance.now();
    }
    canvas.dataset.draws = String(state.draws);
  }

  const legend = document.getElementById("gantt-legend");
  if (legend) {
    legend.textContent = "Nodes (rows) by lease time in seconds. A solid bar: a lease's VM running, in its " +
      "colour; white-hatched: an advance reservation; hatched in the lease's colour: suspending, " +
      "resuming or shutting down; faded with a dashed border: planned, not begun (it may still move); dashed outline " +
      "between two bars: suspended; an arrow between rows: a migration to other nodes; grey, bottom " +
      "row: an image transfer; red line: now.";
  }

  async function loadChart() {
    const r = await fetch("/leases/gantt.json", { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (r.ok) draw(await r.json());
  }
  async function loadTables() {
    // (the same page of each table: the address keeps its limit and cursors)
    const r = await fetch(location.pathname + location.search, { credentials: "same-origin", headers: { Accept: "text/html" } });
    if (r.status === 503) { location.reload(); return; }  // the service is degraded: its page says why
    if (!r.ok) return;
    const doc = new DOMParser().parseFromString(await r.text(), "text/html");
    for (const sel of ["#lease-tables", "p.now"]) {
      const mine = document.querySelector(sel), theirs = doc.querySelector(sel);
      if (mine && theirs) mine.replaceWith(theirs);
    }
  }

  // Refresh at most every 300 ms however many events come; one more after a burst.
  let busy = false, again = false;
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try { await Promise.all([loadChart(), loadTables()]); } catch (err) { /* the next event retries */ }
    setTimeout(() => { busy = false; if (again) { again = false; refresh(); } }, 300);
  }

  loadChart();
  if (window.EventSource) {
    const source = new EventSource("/events");
    source.addEventListener("change", () => { state.changes += 1; refresh(); });
    window.addEventListener("pagehide", () => source.close());
  }
  window.addEventListener("resize", () => { if (state.model) draw(state.model); });
})();
