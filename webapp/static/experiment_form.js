// The new-experiment form's live count of the runs its matrix makes. The rule is
// trainer.config.matrix_size's: the product over the axes of the number of values chosen,
// an axis with none chosen counting once (it takes the preset's value).
(function () {
  "use strict";
  var form = document.getElementById("experiment-form");
  if (!form) return;

  function listed(text) {
    return text.split(",").map(function (s) { return s.trim(); }).filter(Boolean);
  }

  function count() {
    var total = 1;
    // The axes are the form's fieldsets (vocabulary/names.py's CELL_AXES, rendered by the page).
    form.querySelectorAll("fieldset[data-axis]").forEach(function (fieldset) {
      var axis = fieldset.getAttribute("data-axis");
      var n = form.querySelectorAll('input[name="' + axis + '"]:checked').length;
      if (axis === "model") n += listed(form.elements.other_models.value).length;
      total *= n || 1;
    });
    return total * (listed(form.elements.seeds.value).length || 1);
  }

  function update() {
    var n = count();
    form.querySelectorAll("[data-run-count]").forEach(function (el) {
      el.textContent = n + (n === 1 ? " run" : " runs");
    });
  }

  // The preset's model starts ticked. Models typed under "other models" replace it, unless
  // the user ticked or unticked models themselves: then what they ticked stays as it is.
  var modelBoxes = Array.prototype.slice.call(form.querySelectorAll('input[name="model"]'));
  var defaultModels = modelBoxes.filter(function (box) { return box.checked; });
  var modelsTouched = false;
  modelBoxes.forEach(function (box) {
    box.addEventListener("change", function () { modelsTouched = true; });
  });
  form.elements.other_models.addEventListener("input", function () {
    if (modelsTouched) return;
    var typed = listed(form.elements.other_models.value).length > 0;
    defaultModels.forEach(function (box) { box.checked = !typed; });
  });

  // Switching preset reloads the form: carry the name and description typed so far.
  document.querySelectorAll('.segmented a[href^="?preset="]').forEach(function (link) {
    link.addEventListener("click", function () {
      var url = new URL(link.getAttribute("href"), window.location.href);
      ["name", "description"].forEach(function (field) {
        var value = form.elements[field].value.trim();
        if (value) url.searchParams.set(field, value);
      });
      link.setAttribute("href", url.pathname + url.search);
    });
  });

  form.addEventListener("input", update);
  form.addEventListener("change", update);
  update();
})();
