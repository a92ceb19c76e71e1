/** Where the browser test finds Chromium, and what to say when it is not there. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

export function chromiumMissing(): string {
  return `Chromium, which the browser test (test/browser) drives, is not at ${CHROMIUM}: install it (apt-get install chromium; npm test does so when run as root) or point CHROMIUM_PATH at one`;
}
