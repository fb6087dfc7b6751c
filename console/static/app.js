// The console's only script (the Content-Security-Policy allows no other):
// pages that ask for it (body data-refresh) reload every few seconds,
// unless the operator is typing in a form or has an action open.
(function () {
  'use strict';
  var seconds = Number(document.body && document.body.getAttribute('data-refresh'));
  if (!seconds) return;
  setInterval(function () {
    var active = document.activeElement;
    var busy = active && /^(INPUT|SELECT|TEXTAREA|BUTTON)$/.test(active.tagName);
    var open = document.querySelector('details[open]');
    if (!busy && !open && !document.hidden) window.location.reload();
  }, seconds * 1000);
})();
