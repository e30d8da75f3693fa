// The launch form: when another endpoint is picked, offer only the affinity modes it accepts
// (what its connection test found, or its kind's list), say why under the field, and preset
// dynamo-nvext's actions to the generation the test found. When another scenario is picked,
// show its value of each knob (the placeholder of an input, the blank choice of a list): a
// blank field keeps it. The server renders the same for the choices selected at load and
// refuses any other mode, so this only saves a round trip. affinity_actions says what the
// endpoint will get and "client workers per host" is greyed out while "client worker
// processes" is unticked. Every mode list, preset and label comes from the server
// (aiperf_web/runs/forms.py: _offer, actions_label): this script decides none of them.
const offers = JSON.parse(document.getElementById("affinity-data").textContent);
const scenarioValues = JSON.parse(document.getElementById("scenario-values").textContent);
const scenario = document.getElementById("id_scenario");
const target = document.getElementById("id_target");
const affinity = document.getElementById("id_affinity");
const actions = document.getElementById("id_affinity_actions");
const note = affinity.parentElement.querySelector("small");
const processes = document.getElementById("id_client_worker_processes");
const perHost = document.getElementById("id_client_workers_per_host");
let preset = actions && offers[target.value] && actions.value === offers[target.value].actions;

function offer() {
  const found = offers[target.value] || offers.simulated;
  const keep = affinity.value;
  affinity.replaceChildren(new Option(keepLabel("affinity"), ""));
  for (const mode of found.choices) affinity.add(new Option(mode, mode));
  affinity.value = found.choices.includes(keep) ? keep : "";
  if (note) note.textContent = found.note;
  if (actions && (preset || actions.value === "")) {
    actions.value = found.actions || "";
    preset = Boolean(found.actions);
  }
  showActions();
}

// The blank choice of affinity_actions: what a run launched now sends (forms.actions_label,
// made per mode on the server; the scenario's own actions go in its slot).
function showActions() {
  if (!actions) return;
  const hints = scenarioValues[scenario.value] || {};
  const mode = affinity.value || hints.affinity || "";
  const found = offers[target.value] || offers.simulated;
  const blank = [...actions.options].find((o) => o.value === "");
  if (blank) {
    const label = found.actions_labels[mode] ?? found.actions_labels[""];
    blank.textContent = label.replace("{scenario}", hints.affinity_actions ?? "");
  }
  actions.disabled = !found.sends_actions.includes(mode);
}

function followProcesses() {
  if (processes && perHost) perHost.disabled = !processes.checked;
}

function keepLabel(name) {
  const hint = (scenarioValues[scenario.value] || {})[name];
  return hint === undefined ? "— keep —" : `scenario: ${hint}`;
}

function showScenarioValues() {
  for (const [name, hint] of Object.entries(scenarioValues[scenario.value] || {})) {
    const el = document.getElementById(`id_${name}`);
    if (!el) continue;
    if (el.tagName === "SELECT") {
      const blank = [...el.options].find((o) => o.value === "");
      if (blank) blank.textContent = keepLabel(name);
    } else {
      el.placeholder = hint;
    }
  }
  showActions();
}

target.addEventListener("change", offer);
scenario.addEventListener("change", showScenarioValues);
affinity.addEventListener("change", showActions);
if (actions) actions.addEventListener("change", () => { preset = false; });
if (processes) processes.addEventListener("change", followProcesses);
followProcesses();
