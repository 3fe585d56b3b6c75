// The tracked form of a message's HTML part: every http(s) link goes through `/t/c/<token>`, and a 1×1 pixel
// `/t/o/<token>` is added before </body>. Parsed with the runtime's HTMLRewriter (lol-html, a streaming HTML parser),
// so the rest of the markup leaves byte for byte as it came. Text parts are never passed here: they keep their links.

import { decodeHTMLAttribute } from "entities";
import type { Config } from "../../config";
import { clickToken, openToken } from "./tokens";

export type Tracking = {
  messageId: string;
  /** The message's one recipient; null when several recipients receive the same bytes. */
  recipient: string | null;
  /** The tag of the account database the message is in (src/db/hints.ts), so a hit finds it at once. */
  tag: string;
  opens: boolean;
  clicks: boolean;
};

// Longer links stay as they are: the token carries the URL, and links this long are data, not something to count.
const maxTrackedUrlLength = 4_000;

/**
 * The URL a link is rewritten from, or undefined when it is left alone: not http(s) (mailto:, tel:, anchors,
 * relative links), too long, or one of our own `/u/` (unsubscribe) and `/t/` (already tracked) links.
 */
export function trackableUrl(href: string, siteUrl: string): string | undefined {
  const value = decodeHTMLAttribute(href).trim();
  if (value.length > maxTrackedUrlLength || !/^https?:/i.test(value)) return undefined;
  const url = URL.parse(value);
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) return undefined;
  const site = new URL(siteUrl);
  if (url.origin === site.origin && (url.pathname.startsWith("/u/") || url.pathname.startsWith("/t/"))) return undefined;
  // The normalised form is what the redirect's Location carries (ASCII, percent-encoded) and what reports list.
  return url.href;
}

export async function trackHtml(config: Pick<Config, "encryptionKey" | "siteUrl">, html: string, tracking: Tracking): Promise<string> {
  if (!tracking.opens && !tracking.clicks) return html;
  const target = { messageId: tracking.messageId, recipient: tracking.recipient, tag: tracking.tag };
  const link = (path: string) => new URL(path, config.siteUrl).href;
  let rewriter = new HTMLRewriter();
  if (tracking.clicks) {
    rewriter = rewriter.on("a[href], area[href]", {
      async element(element) {
        const url = trackableUrl(element.getAttribute("href") ?? "", config.siteUrl);
        if (url) element.setAttribute("href", link(`/t/c/${await clickToken(config, { ...target, url })}`));
      },
    });
  }
  if (tracking.opens) {
    const pixel = `<img src="${link(`/t/o/${await openToken(config, target)}`)}" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0;margin:0;padding:0">`;
    let placed = false;
    rewriter = rewriter
      .on("body", {
        element(element) {
          element.onEndTag((end) => {
            if (placed) return;
            end.before(pixel, { html: true });
            placed = true;
          });
        },
      })
      // A fragment (no <body>, or one whose end tag is implied) gets the pixel at its very end.
      .onDocument({
        end(end) {
          if (!placed) end.append(pixel, { html: true });
        },
      });
  }
  return rewriter.transform(new Response(html, { headers: { "Content-Type": "text/html; charset=utf-8" } })).text();
}
