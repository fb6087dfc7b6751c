// The console's only script (the Content-Security-Policy allows no other):
// a page that asks for it (body data-live="seconds") reads itself again
// every few seconds and puts in place the regions that changed (each
// element with data-live and an id: the tables, a task's facts), without
// a reload: forms, what the operator types, and the flash stay as they
// are, and a region where a box is ticked or the focus is waits.  The
// request says it is such a read (X-Durable-Live), which keeps it from
// holding the session open by itself.
(function () {
  'use strict';
  var seconds = Number(document.body && document.body.getAttribute('data-live'));
  if (!seconds || !window.fetch || !window.DOMParser) return;
  var reading = false;

  function held(el) {
    return el.querySelector('input:checked') !== null || el.contains(document.activeElement);
  }

  function update(text) {
    var fresh = new DOMParser().parseFromString(text, 'text/html');
    var regions = document.querySelectorAll('[data-live][id]');
    for (var i = 0; i < regions.length; i++) {
      var el = regions[i];
      var now = fresh.getElementById(el.id);
      if (now && !held(el) && now.outerHTML !== el.outerHTML) el.replaceWith(document.importNode(now, true));
    }
  }

  setInterval(function () {
    if (reading || document.hidden) return;
    reading = true;
    fetch(window.location.href, { headers: { 'X-Durable-Live': '1' }, credentials: 'same-origin', redirect: 'manual' })
      .then(function (r) {
        if (r.status === 200) return r.text().then(update);
        return undefined;
      })
      .catch(function () { return undefined; })
      .then(function () { reading = false; });
  }, seconds * 1000);
})();
