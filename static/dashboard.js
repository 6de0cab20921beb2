// Cadence dashboard: renders the finished figures the server embeds as JSON, and
// updates the what-if sections in place. No inline script, no third-party hosts.
(function () {
  "use strict";

  // On a phone the toolbar would sit on the chart's title (and a tap cannot hover it
  // away): no toolbar there; elsewhere it appears only while the pointer is on a chart.
  var NARROW = window.matchMedia && window.matchMedia("(max-width: 700px)").matches;
  var CONFIG = { responsive: true, displaylogo: false, displayModeBar: NARROW ? false : "hover",
    modeBarButtonsToRemove: ["lasso2d", "select2d"] };
  var SPARK = { staticPlot: true, responsive: true };

  function figureFor(el) {
    var source = document.getElementById(el.getAttribute("data-figure"));
    return source ? JSON.parse(source.textContent) : null;
  }

  // A figure that cannot be drawn says so in its own box; the others are unaffected.
  function showFailure(el, err) {
    try { Plotly.purge(el); } catch (ignored) { /* nothing drawn to remove */ }
    var message = document.createElement("p");
    message.className = "chart-error";
    message.textContent = "This chart could not be drawn (" + ((err && err.message) || err) +
      "). The numbers are in the tables on this page; reloading may help.";
    el.replaceChildren(message);
    el.setAttribute("data-rendered", "error");
    if (window.console) { console.warn("chart " + (el.id || "") + " failed:", err); }
  }

  // A chart whose section heading already names it (data-titled="heading") draws no
  // title of its own: the page said it once.
  function untitled(el, layout) {
    if (el.getAttribute("data-titled") !== "heading") { return layout; }
    var copy = Object.assign({}, layout, { title: { text: "" } });
    copy.margin = Object.assign({}, layout.margin, { t: 16 });
    return copy;
  }

  function draw(el) {
    try {
      var fig = figureFor(el);
      if (!fig) { return; }
      var spark = el.classList.contains("spark");
      var drawn = Plotly.react(el, fig.data, untitled(el, fig.layout), spark ? SPARK : CONFIG);
      el.setAttribute("data-rendered", "1");
      // Plotly may also fail later, in its promise (e.g. after an automargin redraw).
      if (drawn && typeof drawn.then === "function") {
        drawn.then(null, function (err) { showFailure(el, err); });
      }
    } catch (err) {
      showFailure(el, err);
    }
  }

  // Each cell carries its column's name, which the phone layout shows beside the value.
  function labelCells(root) {
    (root || document).querySelectorAll("table.data").forEach(function (table) {
      var labels = Array.prototype.map.call(table.querySelectorAll("thead th"), function (th) {
        return th.textContent.replace(/[▲▼]/g, "").trim();
      });
      table.querySelectorAll("tbody tr").forEach(function (row) {
        Array.prototype.forEach.call(row.children, function (cell, i) {
          if (labels[i] && !cell.hasAttribute("data-label")) { cell.setAttribute("data-label", labels[i]); }
        });
      });
    });
  }

  function render(root) {
    labelCells(root);
    if (typeof Plotly === "undefined") { return; }
    (root || document).querySelectorAll("[data-figure]").forEach(draw);
  }

  function debounce(fn, ms) {
    var timer = null;
    return function () {
      clearTimeout(timer);
      timer = setTimeout(fn, ms);
    };
  }

  function whatIfParams(form) {
    var params = new URLSearchParams();
    form.querySelectorAll("input[name], select[name]").forEach(function (input) {
      if (input.hasAttribute("data-unset") || input.value === "") { return; }
      params.set(input.name, input.value);
    });
    return params;
  }

  // The what-if form is closed in the markup so that a phone opens on the answer; from
  // data-open-from pixels up there is room for both, and it opens.
  function openWideDetails() {
    document.querySelectorAll("details[data-open-from]").forEach(function (el) {
      var from = parseInt(el.getAttribute("data-open-from"), 10);
      if (window.matchMedia("(min-width: " + from + "px)").matches) { el.open = true; }
    });
  }

  function setupWhatIf() {
    var form = document.getElementById("whatif-form");
    if (!form) { return; }
    var target = document.getElementById("whatif-sections");
    var engineer = document.getElementById("whatif-engineer");  // checkpoints, further down
    var decision = document.getElementById("whatif-decision");  // the answer, above the form
    var status = document.getElementById("whatif-status");
    var range = form.querySelector("input[type=range]");
    var output = document.getElementById("ut-out");
    var pending = null;

    function update() {
      var params = whatIfParams(form);
      var gateKeys = ["baseline", "candidate", "min_uplift", "margin", "alpha"];
      var request = new URLSearchParams(params);
      var current = new URLSearchParams(window.location.search);
      gateKeys.forEach(function (k) { if (current.has(k)) { request.set(k, current.get(k)); } });
      status.textContent = "Updating…";
      if (pending) { pending.abort(); }
      pending = new AbortController();
      fetch(form.getAttribute("data-whatif") + "?" + request.toString(), {
        headers: { Accept: "application/json" }, signal: pending.signal
      }).then(function (response) {
        return response.json().then(function (body) {
          if (!response.ok) {
            var error = body.error || {};
            var field = (error.fields && error.fields[0]) || {};
            throw new Error(field.field ? field.field + ": " + field.reason : (error.message || response.statusText));
          }
          return body;
        });
      }).then(function (body) {
        target.innerHTML = body.html;
        render(target);
        if (decision && typeof body.decision_html === "string") {
          decision.innerHTML = body.decision_html;
        }
        if (engineer && typeof body.engineer_html === "string") {
          engineer.innerHTML = body.engineer_html;
          render(engineer);
        }
        var value = document.getElementById("whatif-value");
        if (value && typeof body.value_html === "string") {
          value.innerHTML = body.value_html;
          render(value);
        }
        setupGateForm();
        var unit = document.getElementById("unit-toggle");
        if (unit) { keepUnitInLinks(unit.value); }  // the re-rendered gate form and links
        var keep = new URLSearchParams(window.location.search);
        ["cadence", "utilization_target", "price", "price_from", "workers", "failure_rate", "checkpoint_interval_hours", "budget", "weeks_per_month"].forEach(function (k) {
          keep.delete(k);
        });
        params.forEach(function (v, k) { keep.set(k, v); });
        var query = keep.toString();
        history.replaceState(null, "", window.location.pathname + (query ? "?" + query : "") + window.location.hash);
        status.textContent = "Updated";
      }).catch(function (err) {
        if (err.name === "AbortError") { return; }
        status.textContent = "Could not update: " + err.message;
      });
    }

    var later = debounce(update, 250);
    if (range) {
      if (range.hasAttribute("data-unset")) { range.value = range.getAttribute("data-observed") || "0.5"; }
      range.addEventListener("input", function () {
        range.removeAttribute("data-unset");
        output.textContent = Math.round(parseFloat(range.value) * 100) + "%";
      });
    }
    form.addEventListener("input", later);
    form.addEventListener("change", later);
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      update();
    });
  }

  // The gate form carries the what-if view along, as it is now (not as it was loaded).
  function setupGateForm() {
    var gate = document.querySelector(".gate-form");
    var whatIf = document.getElementById("whatif-form");
    if (!gate || !whatIf) { return; }
    gate.addEventListener("submit", function () {
      gate.querySelectorAll("[data-whatif-copy]").forEach(function (el) { el.remove(); });
      whatIfParams(whatIf).forEach(function (value, name) {
        var input = document.createElement("input");
        input.type = "hidden";
        input.name = name;
        input.value = value;
        input.setAttribute("data-whatif-copy", "");
        gate.appendChild(input);
      });
    });
  }

  // The unit (GPU-hours or USD) is part of the view: kept in the URL as ?unit=usd, so a
  // reload, a copied link, the table's sort and page links and the gate form keep it.
  var UNITS = ["gpu", "usd"];

  function withUnit(query, unit) {
    if (unit === UNITS[0]) { query.delete("unit"); } else { query.set("unit", unit); }
    return query;
  }

  function keepUnitInLinks(unit) {
    document.querySelectorAll("a[href]").forEach(function (link) {
      var href = link.getAttribute("href");
      var url = new URL(href, window.location.href);
      var samePage = url.origin === window.location.origin && url.pathname === window.location.pathname;
      if (!samePage || href.charAt(0) === "#") { return; }
      url.search = withUnit(url.searchParams, unit).toString();
      link.setAttribute("href", url.pathname + url.search + url.hash);
    });
    var gate = document.querySelector(".gate-form");
    if (gate) {
      var input = gate.querySelector("input[name=unit]");
      if (!input) {
        input = document.createElement("input");
        input.type = "hidden";
        input.name = "unit";
        gate.appendChild(input);
      }
      input.value = unit;
      input.disabled = unit === UNITS[0];
    }
  }

  function setupUnitToggle() {
    var toggle = document.getElementById("unit-toggle");
    if (!toggle) { return; }
    var asked = new URLSearchParams(window.location.search).get("unit");
    if (UNITS.indexOf(asked) >= 0) { toggle.value = asked; }
    function apply() {
      document.querySelectorAll("[data-unit]").forEach(function (el) {
        el.hidden = el.getAttribute("data-unit") !== toggle.value;
        if (!el.hidden && typeof Plotly !== "undefined") {
          el.querySelectorAll("[data-rendered='1']").forEach(function (chart) { Plotly.Plots.resize(chart); });
        }
      });
    }
    toggle.addEventListener("change", function () {
      apply();
      var query = withUnit(new URLSearchParams(window.location.search), toggle.value).toString();
      history.replaceState(null, "", window.location.pathname + (query ? "?" + query : "") + window.location.hash);
      keepUnitInLinks(toggle.value);
    });
    apply();
    keepUnitInLinks(toggle.value);
  }

  function setupPrint() {
    document.querySelectorAll("[data-print]").forEach(function (link) {
      link.addEventListener("click", function (event) {
        event.preventDefault();
        window.print();
      });
    });
  }

  // A folded part (the engineering detail on a phone) opens on a link into it, and the
  // charts drawn while it was closed take their width once it opens.
  function openFor(hash) {
    if (!hash || hash.length < 2) { return; }
    var target = document.getElementById(decodeURIComponent(hash.slice(1)));
    var fold = target && target.closest("details");
    if (fold && !fold.open) {
      fold.open = true;
      target.scrollIntoView();
    }
  }

  function setupFolds() {
    // Any fold (the engineering detail, the record's chart, one a what-if redrew): a
    // capturing listener on the document, as "toggle" does not bubble.
    document.addEventListener("toggle", function (event) {
      var fold = event.target;
      if (!fold.open || !fold.querySelectorAll || typeof Plotly === "undefined") { return; }
      fold.querySelectorAll("[data-rendered='1']").forEach(function (chart) {
        if (chart.offsetParent !== null) { Plotly.Plots.resize(chart); }
      });
    }, true);
    document.addEventListener("click", function (event) {
      var link = event.target.closest && event.target.closest("a[href^='#']");
      if (link) { openFor(link.getAttribute("href")); }
    });
    window.addEventListener("hashchange", function () { openFor(window.location.hash); });
    openFor(window.location.hash);
  }

  document.addEventListener("DOMContentLoaded", function () {
    openWideDetails();
    setupFolds();
    render(document);
    setupWhatIf();
    setupGateForm();
    setupUnitToggle();
    setupPrint();
  });
})();
