/* The approval page's countdown as a static file (the Content-Security-Policy runs no inline script).
   Display only: it shows the time left and never submits or changes anything. */
(function () {
  "use strict";
  const node = document.getElementById("tess-approval-countdown");
  if (!node) return;
  const expires = Date.parse(node.getAttribute("data-expires"));
  function tick() {
    const left = Math.max(0, Math.floor((expires - Date.now()) / 1000));
    node.textContent = left > 0 ? Math.floor(left / 60) + " min " + (left % 60) + " s left" : "expired";
    if (left > 0) window.setTimeout(tick, 1000);
  }
  tick();
})();
