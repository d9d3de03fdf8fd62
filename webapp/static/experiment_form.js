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
    ["workflow", "task", "model", "sharing"].forEach(function (axis) {
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

  form.addEventListener("input", update);
  form.addEventListener("change", update);
  update();
})();
