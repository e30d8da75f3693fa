// The launch form: when another endpoint is picked, offer only the affinity modes it accepts
// (what its connection test found, or its kind's list), say why under the field, and preset
// dynamo-nvext's actions to the generation the test found. The server renders the same for
// the endpoint selected at load and refuses any other mode, so this only saves a round trip.
const offers = JSON.parse(document.getElementById("affinity-data").textContent);
const target = document.getElementById("id_target");
const affinity = document.getElementById("id_affinity");
const actions = document.getElementById("id_affinity_actions");
const note = affinity.parentElement.querySelector("small");
let preset = actions && offers[target.value] && actions.value === offers[target.value].actions;

function offer() {
  const found = offers[target.value] || offers.simulated;
  const keep = affinity.value;
  affinity.replaceChildren(new Option("— keep —", ""));
  for (const mode of found.choices) affinity.add(new Option(mode, mode));
  affinity.value = found.choices.includes(keep) ? keep : "";
  if (note) note.textContent = found.note;
  if (actions && (preset || actions.value === "")) {
    actions.value = found.actions || "";
    preset = Boolean(found.actions);
  }
}

target.addEventListener("change", offer);
if (actions) actions.addEventListener("change", () => { preset = false; });
