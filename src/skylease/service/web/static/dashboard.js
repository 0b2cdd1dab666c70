// skylease dashboard: asks before a form with data-confirm (a lease's Cancel button) is sent (the
// Gantt chart is gantt.js).
"use strict";
document.addEventListener("submit", (event) => {
  const text = event.target.dataset && event.target.dataset.confirm;
  if (text && !window.confirm(text)) event.preventDefault();
});
