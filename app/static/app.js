// A little progressive enhancement; every page works without it.
(function () {
  "use strict";

  // "/" jumps to the search box (GitHub-style), unless the user is typing somewhere.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
    var target = event.target;
    var typing = target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
    var box = document.getElementById("q");
    if (typing || !box) return;
    event.preventDefault();
    box.focus();
    box.select();
  });

  // Keep search URLs short and shareable: leave out empty fields and the default limit.
  var search = document.getElementById("search");
  if (search) {
    search.addEventListener("formdata", function (event) {
      var data = event.formData;
      Array.from(data.keys()).forEach(function (key) {
        var values = data.getAll(key).filter(function (v) { return v !== ""; });
        if (key === "limit") values = values.filter(function (v) { return v !== "10"; });
        data.delete(key);
        values.forEach(function (v) { data.append(key, v); });
      });
    });
  }

  // On a phone the filter panel starts folded (unless a filter is on), so results come first.
  var filters = document.querySelector("details.filters");
  if (filters && window.matchMedia("(max-width: 759px)").matches && filters.dataset.active === "0") {
    filters.open = false;
  }
})();
