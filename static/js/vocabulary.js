// What the scripts must agree with the server on, as Python declares it (aiperf_web/live/
// vocabulary.py: the live channel's message types and close codes, the run statuses, the error
// categories' colours), read from the page's <script type="application/json" id="vocabulary">
// (base.html and the offline export). tests/web/test_live_messages.py holds the scripts to it.
const el = typeof document === "undefined" ? null : document.getElementById("vocabulary");
export const VOCABULARY = el ? JSON.parse(el.textContent) : {
  messages: [], close_codes: [], statuses: [], active_statuses: [], final_statuses: [],
  error_categories: [], error_colours: {},
};
export const FINAL_STATUSES = new Set(VOCABULARY.final_statuses);
// Closes after which a new socket would be refused the same way: the page stops.
export const FINAL_CLOSE_CODES = new Set(VOCABULARY.close_codes.filter((c) => c.final).map((c) => c.code));
export const ERROR_COLOURS = VOCABULARY.error_colours;
