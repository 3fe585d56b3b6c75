import { convert } from "html-to-text";

const keepCase = { options: { uppercase: false } };

/**
 * The plain-text alternative of an HTML body: what a reader that cannot show HTML displays, and what spam filters
 * expect beside the HTML (SpamAssassin scores HTML-only mail). Links stay usable as `text [url]` (tracking redirects
 * included, so a click in the text part counts like one in the HTML); images, the open pixel among them, are left
 * out; headings keep their case, so placeholders and names read as written.
 */
export function textFromHtml(html: string): string {
  return convert(html, {
    wordwrap: 78,
    selectors: [
      { selector: "a", options: { hideLinkHrefIfSameAsText: true } },
      { selector: "img", format: "skip" },
      ...["h1", "h2", "h3", "h4", "h5", "h6"].map((selector) => ({ selector, ...keepCase })),
      { selector: "table", format: "dataTable", options: { uppercaseHeaderCells: false } },
    ],
  }).trim();
}
