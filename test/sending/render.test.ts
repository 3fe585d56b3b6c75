import { describe, expect, it } from "vitest";
import { placeholderNames, renderTemplate } from "../../src/domain/sending/render";

describe("renderTemplate", () => {
  it("replaces placeholders, tolerating whitespace inside the braces", () => {
    expect(renderTemplate("Hi {{name}}, {{ plan }} / {{  order.id  }}", { name: "Ann", plan: "Pro", "order.id": 42 }, { html: false })).toBe(
      "Hi Ann, Pro / 42",
    );
  });

  it("uses the fallback when a variable is missing, null or empty", () => {
    const template = "Hi {{name|there}}, {{ city | your town }}!";
    expect(renderTemplate(template, {}, { html: false })).toBe("Hi there, your town!");
    expect(renderTemplate(template, { name: null, city: "" }, { html: false })).toBe("Hi there, your town!");
    expect(renderTemplate(template, { name: "Ann", city: "Oslo" }, { html: false })).toBe("Hi Ann, Oslo!");
  });

  it("renders a missing variable without fallback as the empty string", () => {
    expect(renderTemplate("[{{missing}}]", {}, { html: true })).toBe("[]");
    expect(renderTemplate("[{{ obj }}]", { obj: { nested: true } }, { html: false })).toBe("[]");
  });

  it("reads dotted names from nested objects, own properties only", () => {
    expect(renderTemplate("{{user.first}} {{user.address.city}}", { user: { first: "Ann", address: { city: "Oslo" } } }, { html: false })).toBe(
      "Ann Oslo",
    );
    expect(renderTemplate("{{constructor}}{{user.constructor.name}}{{__proto__}}", { user: {} }, { html: false })).toBe("");
  });

  it("HTML-escapes values and fallbacks in html, and leaves text and subject raw", () => {
    const variables = { name: `<script>alert("x")</script> & 'co'` };
    expect(renderTemplate("<p>{{name}}</p>", variables, { html: true })).toBe(
      "<p>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;co&#39;</p>",
    );
    expect(renderTemplate("<b>{{x|<i>&</i>}}</b>", {}, { html: true })).toBe("<b>&lt;i&gt;&amp;&lt;/i&gt;</b>");
    expect(renderTemplate("Hi {{name}}", variables, { html: false })).toBe(`Hi <script>alert("x")</script> & 'co'`);
  });

  it("never evaluates templates or re-expands placeholders found in values", () => {
    const variables = { a: "{{b}}", b: "SECRET" };
    expect(renderTemplate("{{a}}", variables, { html: false })).toBe("{{b}}");
    expect(renderTemplate("{{ 1 + 1 }} {{a()}} ${a} {{ a b }}", variables, { html: false })).toBe("{{ 1 + 1 }} {{a()}} ${a} {{ a b }}");
  });

  it("keeps text around and between placeholders untouched", () => {
    expect(renderTemplate("{{a}}{{b}} {single} }} {{", { a: "1", b: "2" }, { html: false })).toBe("12 {single} }} {{");
  });

  it("stays fast on many unterminated placeholders", () => {
    const source = "{{a|".repeat(50_000) + "x".repeat(100_000);
    expect(renderTemplate(source, { a: "1" }, { html: true })).toBe(source);
  });
});

describe("placeholderNames", () => {
  it("lists each name once in order of first use", () => {
    expect(placeholderNames("{{b}} {{ a | x }} {{b}} {{c.d-e_f}} {{ not valid }}")).toEqual(["b", "a", "c.d-e_f"]);
    expect(placeholderNames("no placeholders")).toEqual([]);
  });
});
