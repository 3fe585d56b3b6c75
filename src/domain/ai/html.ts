// The HTML a model writes is untrusted: it becomes a campaign a person will send to their contacts. sanitize-html
// (htmlparser2, no DOM, so it runs on Workers) keeps the tags and inline styles email HTML is made of and drops
// everything that runs code or loads a page: script/style/iframe/object/embed/form, every `on*` attribute, and
// URLs other than http(s)/mailto/tel. Placeholders (`{{first_name|there}}`, `href="{{unsubscribe_url}}"`) carry no
// scheme, so they survive as they are; the campaign renderer fills them in later, HTML-escaped.

import sanitizeHtml from "sanitize-html";

// Style values that can load or run something in some client (old IE `expression()`, `-moz-binding`, `url()`), and
// any CSS escape or comment: `u\72l(` and `expr/**/ession(` spell the same things past a pattern, and email styles
// never need either.
const unsafeStyle = /expression\s*\(|url\s*\(|javascript:|behavior\s*:|-moz-binding|@import|\\|\/\*/i;

const emailAttributes = ["style", "align", "valign", "width", "height", "bgcolor", "border", "dir", "lang", "title", "role"];

const options: sanitizeHtml.IOptions = {
  allowedTags: [...sanitizeHtml.defaults.allowedTags, "img", "center", "font"],
  allowedAttributes: {
    "*": emailAttributes,
    a: ["href", "name", "target", "rel"],
    img: ["src", "alt"],
    table: ["cellpadding", "cellspacing", "role"],
    td: ["colspan", "rowspan"],
    th: ["colspan", "rowspan", "scope"],
    font: ["color", "face", "size"],
  },
  allowedSchemes: ["http", "https", "mailto", "tel"],
  allowedSchemesByTag: { img: ["http", "https"] },
  allowProtocolRelative: false,
  // Their text is code or page metadata, not content: dropped together with the tag.
  nonTextTags: ["script", "style", "textarea", "option", "noscript", "title", "head", "iframe", "object", "template"],
  transformTags: {
    "*": (tagName, attribs) => {
      if (attribs.style !== undefined && unsafeStyle.test(attribs.style)) {
        const { style: _dropped, ...rest } = attribs;
        return { tagName, attribs: rest };
      }
      return { tagName, attribs };
    },
  },
};

/** The model's HTML with only what an email needs; placeholders untouched. */
export function sanitizeEmailHtml(html: string): string {
  return sanitizeHtml(html, options).trim();
}

// The text part of a draft is made as every sent HTML message's is.
export { textFromHtml } from "../sending/plain-text";
