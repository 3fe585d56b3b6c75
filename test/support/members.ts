import PostalMime from "postal-mime";
import { browserOf, cookiesOf, type Browser } from "./dashboard";
import { eventually, sinkMessagesTo, sinkRaw } from "./sending";

let counter = 0;
/** An address of its own for each test (the mail sink is shared by every runtime). */
export const uniqueAddress = (label: string) => `${label}-${Date.now().toString(36)}-${counter++}@people.test`;

export type PlatformMailSeen = { raw: string; text: string; from: string; subject: string; contentType: string };

/** The `count`th mail the sink got for `address` (the first by default), parsed (its text part decoded), waiting for it. */
export async function mailTo(address: string, count = 1): Promise<PlatformMailSeen> {
  const messages = await eventually(async () => {
    const found = await sinkMessagesTo(address);
    return found.length >= count ? found : undefined;
  });
  const raw = await sinkRaw(messages[count - 1]!.id);
  const parsed = await PostalMime.parse(raw);
  return {
    raw,
    text: parsed.text ?? "",
    from: parsed.from?.address ?? "",
    subject: parsed.subject ?? "",
    contentType: /^content-type:\s*([^;\r\n]+)/im.exec(raw)?.[1] ?? "",
  };
}

/** The path and query of the link in a mail to this Worker (`/dashboard/…?token=…`). */
export function linkIn(text: string, path: "/dashboard/invitation" | "/dashboard/sign-in/link"): string {
  const match = new RegExp(`https?://[^/\\s]+(${path.replace(/\//g, "\\/")}\\?token=[A-Za-z0-9_%-]+)`).exec(text);
  if (!match) throw new Error(`no ${path} link in:\n${text}`);
  return match[1]!;
}

const hiddenCsrf = /name="_csrf" value="([^"]+)"/;

/** A fresh browser (no cookies), from its own client address. */
export function newBrowser(): Browser & { ip: string } {
  const [a, b] = crypto.getRandomValues(new Uint8Array(2));
  return Object.assign(browserOf({}), { ip: `198.51.${a}.${1 + (b! % 254)}` });
}

/** Loads `path` in the browser, keeping its cookies and the page's form token. */
export async function open(browser: Browser, path: string): Promise<Response> {
  const response = await browser.get(path);
  cookiesOf(response, browser.jar);
  const html = await response.clone().text();
  browser.csrf = hiddenCsrf.exec(html)?.[1] ?? browser.csrf;
  return response;
}

/** Submits a form of the page last opened, keeping cookies. */
export async function submit(browser: Browser & { ip?: string }, path: string, fields: Record<string, string>): Promise<Response> {
  const response = await browser.post(path, fields, { headers: browser.ip ? { "CF-Connecting-IP": browser.ip } : {} });
  cookiesOf(response, browser.jar);
  const html = await response.clone().text();
  browser.csrf = hiddenCsrf.exec(html)?.[1] ?? browser.csrf;
  return response;
}

/** Accepts the invitation mailed to `address` in a new browser: signed in, on the first page the role may see. */
export async function acceptInvitationOf(address: string): Promise<Browser> {
  const mail = await mailTo(address);
  const browser = newBrowser();
  const page = await open(browser, linkIn(mail.text, "/dashboard/invitation"));
  if (page.status !== 200) throw new Error(`invitation page: ${page.status} ${await page.text()}`);
  const token = /name="token" value="([^"]+)"/.exec(await page.text())?.[1] ?? "";
  const accepted = await submit(browser, "/dashboard/invitation", { token });
  if (accepted.status !== 303) throw new Error(`accepting: ${accepted.status} ${await accepted.text()}`);
  await open(browser, accepted.headers.get("Location")!);
  return browser;
}
