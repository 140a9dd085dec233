/* Tess Web Push service worker: shows an inbox notice and opens the inbox item when it is clicked.
   A notice carries a title and the item's link on /inbox/, nothing else. */
"use strict";

self.addEventListener("push", (event) => {
  let data = {};
  try {
    data = event.data ? event.data.json() : {};
  } catch (error) {
    data = {};
  }
  const title = data.title || "Tess: something waits on you";
  event.waitUntil(
    self.registration.showNotification(title, { body: "Open your inbox", tag: data.key || "tess", data: { url: data.url || "/inbox/" } }),
  );
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const url = (event.notification.data && event.notification.data.url) || "/inbox/";
  event.waitUntil(self.clients.openWindow(url));
});
