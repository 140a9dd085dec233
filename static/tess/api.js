/* Tess drawer: REST and DOM helpers shared by drawer.js and memory.js. No framework, no external requests. */
(function () {
  "use strict";

  function cookie(name) {
    const found = document.cookie.split(";").map((c) => c.trim()).find((c) => c.startsWith(name + "="));
    return found ? decodeURIComponent(found.slice(name.length + 1)) : "";
  }

  class ApiError extends Error {
    constructor(status, body) {
      const error = (body && body.error) || {};
      super(error.message || "The request failed (" + status + ").");
      this.status = status;
      this.code = error.code || "http_" + status;
      this.details = error.details || {};
    }
  }

  /* JSON over the session cookie; every effectful request carries the CSRF header and a fresh
     Idempotency-Key (a retry of the same click would reuse it; a new click is a new key). */
  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    if (method !== "GET") {
      headers["X-CSRFToken"] = cookie("csrftoken");
      headers["Idempotency-Key"] = crypto.randomUUID();
    }
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch("/api/v1/" + path, {
      method,
      headers,
      credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    const data = text ? JSON.parse(text) : null;
    if (!response.ok) throw new ApiError(response.status, data);
    return data;
  }

  /* el("li", {class: "x", text: "y"}, child...) — text only through textContent, never innerHTML. */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = value;
      else if (key === "class") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }

  function plural(n, one, many) {
    return n + " " + (n === 1 ? one : many);
  }

  window.Tess = { api, el, plural, ApiError };
})();
