import { describe, expect, it } from "vitest";
import { sanitizeEmailHtml, textFromHtml } from "../../src/domain/ai/html";

// These run inside workerd: sanitize-html and html-to-text work on Workers (no DOM).
describe("sanitizeEmailHtml", () => {
  it.each([
    ["a script and its code", "<p>Hi</p><script>alert(1)</script>", "<p>Hi</p>"],
    ["a style element and its rules", "<style>p{color:red}</style><p>Hi</p>", "<p>Hi</p>"],
    [
      "an iframe, object and embed",
      '<iframe src="https://e.example"></iframe><object data="x.swf">fallback</object><embed src="x"><p>Hi</p>',
      "<p>Hi</p>",
    ],
    [
      "a form and its inputs, keeping their text",
      '<form action="https://e.example"><label>Card</label><input name="card"><button>Pay</button></form>',
      "CardPay",
    ],
    ["event handlers in any case", '<p onclick="x()" ONMOUSEOVER="y()" onLoad="z()">Hi</p>', "<p>Hi</p>"],
    [
      "javascript: links, also disguised",
      '<a href="javascript:alert(1)">a</a><a href="JaVaScRiPt:alert(1)">b</a><a href="jav&#x09;ascript:alert(1)">c</a>',
      "<a>a</a><a>b</a><a>c</a>",
    ],
    [
      "data: URLs in links and images",
      '<a href="data:text/html,<script>alert(1)</script>">a</a><img src="data:image/png;base64,AAAA" alt="x">',
      '<a>a</a><img alt="x" />',
    ],
    ["protocol-relative links", '<a href="//evil.example/">a</a>', "<a>a</a>"],
    ["svg with onload", '<svg onload="alert(1)"><circle r="1"/></svg><p>Hi</p>', "<p>Hi</p>"],
    [
      "meta refresh, base and link",
      '<meta http-equiv="refresh" content="0;url=https://e.example"><base href="https://e.example/"><link rel="stylesheet" href="x.css"><p>Hi</p>',
      "<p>Hi</p>",
    ],
    [
      "styles that load or run something",
      '<p style="background:url(https://e.example/t.gif)">a</p><td style="width:expression(alert(1))">b</td><p style="color:red">c</p>',
      '<p>a</p><td>b</td><p style="color:red">c</p>',
    ],
    [
      "styles that hide those behind CSS escapes or comments",
      '<p style="background:u\\72l(https://e.example/t.gif)">a</p><td style="width:expr/**/ession(alert(1))">b</td><p style="color:red">c</p>',
      '<p>a</p><td>b</td><p style="color:red">c</p>',
    ],
  ])("removes %s", (_, html, expected) => {
    expect(sanitizeEmailHtml(html)).toBe(expected);
  });

  it("keeps what email HTML is made of: tables, inline styles, https links and images", () => {
    const html =
      '<table role="presentation" width="100%" cellpadding="0" cellspacing="0"><tr><td align="center" style="padding:16px" bgcolor="#ffffff">' +
      '<h1 style="font-size:24px">Sale</h1><a href="https://shop.example/sale?utm=ai" target="_blank">Shop</a>' +
      '<img src="https://shop.example/hero.png" alt="Hero" width="600"></td></tr></table>';
    expect(sanitizeEmailHtml(html)).toBe(
      '<table role="presentation" width="100%" cellpadding="0" cellspacing="0"><tr><td align="center" style="padding:16px" bgcolor="#ffffff">' +
        '<h1 style="font-size:24px">Sale</h1><a href="https://shop.example/sale?utm=ai" target="_blank">Shop</a>' +
        '<img src="https://shop.example/hero.png" alt="Hero" width="600" /></td></tr></table>',
    );
  });

  it("keeps placeholders in text, in attributes and as a link target", () => {
    const html =
      '<p title="For {{first_name|there}}">Hi {{first_name|there}}, {{ company }}</p><a href="{{unsubscribe_url}}">Unsubscribe</a><a href="mailto:{{email}}">Me</a>';
    expect(sanitizeEmailHtml(html)).toBe(html);
  });
});

describe("textFromHtml", () => {
  it("keeps paragraphs, link targets and placeholders as written (headings are not upper-cased)", () => {
    const text = textFromHtml(
      '<h1>Hello {{first_name|there}}</h1><p>Our sale starts now.</p><p><a href="https://shop.example/">Shop</a></p><p><a href="{{unsubscribe_url}}">Unsubscribe</a></p>',
    );
    expect(text).toBe("Hello {{first_name|there}}\n\nOur sale starts now.\n\nShop [https://shop.example/]\n\nUnsubscribe [{{unsubscribe_url}}]");
  });
});
