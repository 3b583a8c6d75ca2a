// gitkb web page: the live status panel, and small touches on forms. Plain JavaScript, no build.
(function () {
  "use strict";

  var POLL_MS = 2000;

  function setText(root, field, value) {
    var el = root.querySelector('[data-field="' + field + '"]');
    if (el && el.textContent !== String(value)) el.textContent = String(value);
  }

  function renderSkipped(tbody, files) {
    while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
    if (!files.length) {
      var tr = document.createElement("tr");
      tr.className = "empty";
      var td = document.createElement("td");
      td.colSpan = 3;
      td.textContent = "No skipped files.";
      tr.appendChild(td);
      tbody.appendChild(tr);
      return;
    }
    files.forEach(function (f) {
      var tr = document.createElement("tr");
      var path = document.createElement("td");
      var code = document.createElement("code");
      code.textContent = f.path || "";
      path.appendChild(code);
      var reason = document.createElement("td");
      var badge = document.createElement("span");
      badge.className = "badge reason";
      badge.textContent = f.category || "";
      reason.appendChild(badge);
      var detail = document.createElement("td");
      detail.textContent = f.detail || "";
      tr.appendChild(path);
      tr.appendChild(reason);
      tr.appendChild(detail);
      tbody.appendChild(tr);
    });
  }

  function apply(panel, s) {
    var badge = panel.querySelector('[data-field="status"]');
    if (badge) {
      badge.textContent = s.status;
      badge.className = "badge status-" + s.status;
    }
    panel.setAttribute("data-status-state", s.status);
    setText(panel, "Message", s.Message || "");
    ["queue_depth", "dirty_paths", "dirty_embeddings", "documents_indexed"].forEach(function (k) {
      setText(panel, k, s[k] == null ? "—" : s[k]);
    });
    setText(panel, "error", s.error || "");
    var job = s.in_flight_job;
    var bar = panel.querySelector('[data-field="progress"]');
    if (job) {
      var p = job.progress || {};
      setText(panel, "in_flight_text", job.kind + " · " + (job.job_id || "background"));
      setText(panel, "progress_text", (p.done || 0) + " / " + (p.total == null ? "?" : p.total) + (p.note ? " · " + p.note : ""));
      if (bar) {
        if (s.progress_percent == null) bar.removeAttribute("value");
        else bar.value = s.progress_percent;
      }
    } else {
      setText(panel, "in_flight_text", "idle");
      setText(panel, "progress_text", "no job running");
      if (bar) bar.value = 0;
    }
    var files = s.skipped_files || [];
    setText(panel, "skipped_count", files.length);
    var tbody = panel.querySelector('[data-field="skipped_files"]');
    var key = JSON.stringify(files);
    if (tbody && tbody.getAttribute("data-key") !== key) {
      renderSkipped(tbody, files);
      tbody.setAttribute("data-key", key);
    }
    setText(panel, "updated", new Date().toLocaleTimeString());
  }

  function poll(panel) {
    var url = panel.getAttribute("data-status-url");
    var timer = null;
    function tick() {
      if (document.hidden) {
        timer = setTimeout(tick, POLL_MS);
        return;
      }
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) {
          // every JSON answer is the envelope: {"Success": true, ...} or {"Success": false, "Error", "code", ...}
          return r.json().catch(function () { return {}; }).then(function (s) {
            if (!r.ok || s.Success !== true) throw new Error(s.Error || "status " + r.status);
            return s;
          });
        })
        .then(function (s) {
          apply(panel, s);
          panel.removeAttribute("data-stale");
        })
        .catch(function (e) {
          panel.setAttribute("data-stale", "true");
          setText(panel, "updated", "refresh failed (" + e.message + "), retrying");
        })
        .finally(function () {
          timer = setTimeout(tick, POLL_MS);
        });
    }
    tick();
    return function () { clearTimeout(timer); };
  }

  function wireForms() {
    // A submitted Approve button says what is happening and cannot be pressed twice.
    document.querySelectorAll("button[data-busy-label]").forEach(function (b) {
      b.form.addEventListener("submit", function () {
        b.disabled = true;
        b.textContent = b.getAttribute("data-busy-label");
      });
    });
    // Opening "Deny…" moves the focus to the reason box.
    document.querySelectorAll("details.deny").forEach(function (d) {
      d.addEventListener("toggle", function () {
        if (d.open) {
          var t = d.querySelector("textarea");
          if (t) t.focus();
        }
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-status-url]").forEach(poll);
    wireForms();
  });
})();
