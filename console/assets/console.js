// The operators' console's one script (package console's doc.go): it keeps
// the admin token in this tab's sessionStorage, sends it as a bearer token
// on every request it makes for a page, and swaps the server-rendered page
// into <main>. It never puts the token in a URL, a cookie or a form.
(function () {
  'use strict';
  var KEY = 'voiceroom.console.token';
  var main = document.getElementById('main');

  function token() {
    try { return sessionStorage.getItem(KEY) || ''; } catch (e) { return ''; }
  }

  function show(html) {
    main.innerHTML = html; // html/template escaped it; the CSP runs no inline script
    var h = main.querySelector('h1');
    document.title = (h ? h.textContent + ' · ' : '') + 'voiceroom console';
    var focus = main.querySelector('[autofocus], .error, .flash');
    if (focus && focus.focus) { focus.focus(); }
    if (window.performance && performance.mark) { performance.mark('console:shown'); } // read by the page's benchmark
  }

  // load fetches a page's content (GET) or posts a form, then shows it.
  // how is 'push' (a new history entry), 'replace' or 'pop' (back/forward).
  function load(method, url, body, how) {
    var headers = { 'X-Console': '1' };
    var t = token();
    if (t) { headers.Authorization = 'Bearer ' + t; }
    if (body) { headers['Content-Type'] = 'application/x-www-form-urlencoded'; }
    main.setAttribute('aria-busy', 'true');
    return fetch(url, { method: method, headers: headers, body: body, credentials: 'omit', cache: 'no-store', redirect: 'error' })
      .then(function (r) {
        if (r.headers.get('X-Console-Auth') === 'refused') {
          try { sessionStorage.removeItem(KEY); } catch (e) { /* nothing kept */ }
        }
        var loc = r.headers.get('X-Console-Location') || url;
        return r.text().then(function (html) {
          if (!r.ok) { html = '<p class="error" role="alert"></p>'; }
          show(html);
          if (!r.ok) { main.querySelector('.error').textContent = 'The console answered ' + r.status + '.'; }
          if (how === 'push' && loc !== location.pathname + location.search) { history.pushState(null, '', loc); }
          if (how === 'replace') { history.replaceState(null, '', loc); }
        });
      })
      .catch(function (e) {
        show('<p class="error" role="alert"></p>');
        main.querySelector('.error').textContent = 'The console could not reach the server: ' + e.message;
      })
      .then(function () { main.removeAttribute('aria-busy'); });
  }

  document.addEventListener('click', function (e) {
    var a = e.target.closest('a[href]');
    if (!a || a.origin !== location.origin || a.pathname.indexOf('/console') !== 0 ||
        a.target || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) { return; }
    e.preventDefault();
    if (a.hasAttribute('data-signout')) {
      try { sessionStorage.removeItem(KEY); } catch (err) { /* nothing kept */ }
      load('GET', '/console/', null, 'push');
      return;
    }
    load('GET', a.pathname + a.search, null, 'push');
  });

  document.addEventListener('submit', function (e) {
    var f = e.target;
    e.preventDefault();
    if (f.hasAttribute('data-signin')) {
      var t = f.elements.token.value.trim();
      f.reset();
      try { sessionStorage.setItem(KEY, t); } catch (err) { /* the API refuses the next call */ }
      load('GET', location.pathname + location.search, null, 'replace');
      return;
    }
    var data = new URLSearchParams(new FormData(f, e.submitter));
    var action = new URL(f.getAttribute('action') || location.pathname, location.href);
    if ((f.getAttribute('method') || 'get').toLowerCase() === 'get') {
      load('GET', action.pathname + '?' + data.toString(), null, 'push');
    } else {
      load('POST', action.pathname, data.toString(), 'push');
    }
  });

  window.addEventListener('popstate', function () {
    load('GET', location.pathname + location.search, null, 'pop');
  });

  load('GET', location.pathname + location.search, null, 'replace');
}());
