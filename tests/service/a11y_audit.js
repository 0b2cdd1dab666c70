// The dashboard's accessibility audit (tests/service/test_dashboard_a11y.py): evaluated in a page,
// it returns the problems found (an empty list: none).
() => {
  const problems = [];
  const name = (el) => (el.getAttribute("aria-label") || "").trim()
    || (el.getAttribute("aria-labelledby") || "").split(/\s+/).map((id) => {
      const t = id && document.getElementById(id); return t ? t.textContent.trim() : ""; }).join(" ").trim()
    || Array.from(el.labels || []).map((l) => l.textContent.trim()).join(" ").trim();
  const visible = (el) => { const r = el.getBoundingClientRect(); const s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.visibility !== "hidden" && s.display !== "none"; };
  if (!document.documentElement.lang) problems.push("no lang on <html>");
  if (!document.title.trim()) problems.push("no <title>");
  if (document.querySelectorAll("h1").length !== 1) problems.push("not exactly one <h1>");
  for (const el of document.querySelectorAll("input:not([type=hidden]), select, textarea")) {
    if (!name(el)) problems.push(`${el.tagName.toLowerCase()} without a label: ${el.outerHTML.slice(0, 80)}`);
  }
  for (const el of document.querySelectorAll("button")) {
    if (!el.textContent.trim() && !name(el)) problems.push(`a button without a name: ${el.outerHTML.slice(0, 80)}`);
  }
  for (const el of document.querySelectorAll("canvas, svg")) {
    const titled = el.tagName.toLowerCase() === "svg" && el.querySelector(":scope > title");
    if (el.closest("[aria-hidden=true]")) continue;
    if (el.getAttribute("role") !== "img" || !(name(el) || titled))
      problems.push(`a chart without role=img and a name: ${el.outerHTML.slice(0, 80)}`);
  }
  for (const t of document.querySelectorAll("table")) {
    if (!t.querySelector("caption") && !name(t)) problems.push("a table without a caption");
  }
  for (const el of document.querySelectorAll("[tabindex]")) {
    if (Number(el.getAttribute("tabindex")) > 0) problems.push(`a positive tabindex: ${el.outerHTML.slice(0, 80)}`);
  }
  // contrast of every piece of visible text against the first opaque background behind it
  const rgb = (c) => (c.match(/[\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
    .reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.backgroundImage !== "none") return null; // (drawn on an image or a gradient: not judged)
      const c = rgb(s.backgroundColor);
      if (c.length >= 3 && (c.length < 4 || c[3] >= 0.99)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = new Set();
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || !el || seen.has(el) || !visible(el) || el.closest("svg, option")) continue;
    seen.add(el);
    const s = getComputedStyle(el), bg = background(el);
    if (bg === null) continue;
    const fg = rgb(s.color), a = fg.length > 3 ? fg[3] : 1;
    const shown = fg.slice(0, 3).map((v, i) => v * a + bg[i] * (1 - a));
    const [hi, lo] = [lum(shown), lum(bg)].sort((x, y) => y - x);
    const ratio = (hi + 0.05) / (lo + 0.05);
    const size = parseFloat(s.fontSize), bold = Number(s.fontWeight) >= 700;
    const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    if (ratio < need) problems.push(`contrast ${ratio.toFixed(2)} < ${need} for "${n.textContent.trim().slice(0, 40)}"`);
  }
  return problems;
}
