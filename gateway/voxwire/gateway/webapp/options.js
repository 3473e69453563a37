// What a session asks for, from a tab's pickers: the model (among those the
// platform serves), the language ("auto" detects it) and words to expect.

const $ = (/** @type {string} */ selector) => /** @type {any} */ (document.querySelector(selector));

/** The languages offered ("" leaves it to the platform, "auto" detects it). */
const LANGUAGES = [
  ["", "platform default"], ["auto", "detect"], ["en", "English"], ["de", "German"],
  ["fr", "French"], ["es", "Spanish"], ["it", "Italian"], ["pt", "Portuguese"],
  ["nl", "Dutch"], ["pl", "Polish"], ["ja", "Japanese"], ["zh", "Chinese"],
];

/** Fill the pickers of both tabs: the models the platform serves, the first its default. @param {string[]} models */
export function fillPickers(models) {
  for (const select of document.querySelectorAll(".model-picker")) {
    select.replaceChildren(...models.map((name, i) => new Option(i === 0 ? `${name} (default)` : name, name)));
  }
  for (const select of document.querySelectorAll(".language-picker")) {
    select.replaceChildren(...LANGUAGES.map(([code, name]) => new Option(code ? `${name} (${code})` : name, code)));
  }
}

/**
 * The model, language and vocabulary a tab's pickers ask for (unset ones left out).
 * @param {"upload" | "live"} tab
 * @returns {{model?: string, language?: string, vocabulary?: string[]}}
 */
export function sessionOptions(tab) {
  const words = $(`#${tab}-vocabulary`).value.split(",").map((/** @type {string} */ w) => w.trim()).filter(Boolean);
  return {
    model: $(`#${tab}-model`).value || undefined,
    language: $(`#${tab}-language`).value || undefined,
    vocabulary: words.length ? words : undefined,
  };
}
