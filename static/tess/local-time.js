/* Dates on Tess's pages are rendered by the server in UTC inside <time datetime="…">; this shows them in the
   reader's own time zone and language. Display only: without it the UTC text stays readable. */
(function () {
  "use strict";
  const format = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
  document.querySelectorAll("time[datetime]").forEach(function (node) {
    const when = Date.parse(node.getAttribute("datetime"));
    if (!Number.isNaN(when)) {
      node.title = node.textContent;
      node.textContent = format.format(new Date(when));
    }
  });
})();
