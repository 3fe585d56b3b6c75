import { exports } from "cloudflare:workers";

/** A request as a browser sends it, without following redirects (the tests assert them). */
export function visit(path: string, init: { method?: string; headers?: Record<string, string>; body?: string | FormData } = {}): Promise<Response> {
  return exports.default.fetch(
    new Request(`http://localhost${path}`, {
      method: init.method ?? (init.body === undefined ? "GET" : "POST"),
      headers: init.headers,
      body: init.body,
      redirect: "manual",
    }),
  );
}

/** Cookies a browser would keep from a response: name=value of each Set-Cookie, later ones replacing earlier. */
export function cookiesOf(response: Response, jar: Record<string, string> = {}): Record<string, string> {
  for (const line of response.headers.getSetCookie()) {
    const [pair] = line.split(";");
    const index = pair!.indexOf("=");
    const name = pair!.slice(0, index);
    const value = pair!.slice(index + 1);
    if (/Max-Age=0/i.test(line) || value === "") delete jar[name];
    else jar[name] = value;
  }
  return jar;
}

export const cookieHeader = (jar: Record<string, string>) =>
  Object.entries(jar)
    .map(([name, value]) => `${name}=${value}`)
    .join("; ");

export type Browser = {
  jar: Record<string, string>;
  csrf: string;
  get(path: string, headers?: Record<string, string>): Promise<Response>;
  post(path: string, form: Record<string, string>, options?: { csrf?: boolean; headers?: Record<string, string> }): Promise<Response>;
};

const hiddenCsrf = /name="_csrf" value="([^"]+)"/;

/** A random address of the 198.18.0.0/15 benchmarking range: one of ~130,000, so different for each sign-in. */
export const clientAddress = () => {
  const [a, b, c] = crypto.getRandomValues(new Uint8Array(3));
  return `198.${18 + (a! & 1)}.${b}.${1 + (c! % 254)}`;
};

/** Submits the sign-in form as a browser would (its sign-in token cookie and field) from `address`. */
export async function submitSignIn(key: string, address: string): Promise<{ response: Response; jar: Record<string, string> }> {
  const jar: Record<string, string> = {};
  const form = await visit("/dashboard/sign-in");
  cookiesOf(form, jar);
  const token = hiddenCsrf.exec(await form.text())?.[1] ?? "";
  const response = await visit("/dashboard/sign-in", {
    headers: { Cookie: cookieHeader(jar), "Content-Type": "application/x-www-form-urlencoded", "CF-Connecting-IP": address },
    body: new URLSearchParams({ _csrf: token, key }).toString(),
  });
  return { response, jar };
}

/** A browser with a cookie jar: its requests send the jar's cookies, and its posts the last page's form token. */
export function browserOf(jar: Record<string, string>): Browser {
  const browser: Browser = {
    jar,
    csrf: "",
    get: (path, headers = {}) => visit(path, { headers: { Cookie: cookieHeader(jar), ...headers } }),
    post: (path, fields, options = {}) =>
      visit(path, {
        method: "POST",
        headers: { Cookie: cookieHeader(jar), "Content-Type": "application/x-www-form-urlencoded", ...options.headers },
        body: new URLSearchParams(options.csrf === false ? fields : { _csrf: browser.csrf, ...fields }).toString(),
      }),
  };
  return browser;
}

/**
 * Signs in through the form and keeps the session cookie. Each sign-in comes from an address of its own, as each test's
 * user is somebody else: from one address, the files sharing a runtime would together pass the sign-in limit (30 a
 * minute, test/dashboard/session.test.ts).
 */
export async function signIn(key: string): Promise<Browser> {
  const { response, jar } = await submitSignIn(key, clientAddress());
  if (response.status !== 303) throw new Error(`sign-in failed: ${response.status} ${await response.text()}`);
  cookiesOf(response, jar);
  const browser = browserOf(jar);
  const page = await browser.get(response.headers.get("Location") ?? "/dashboard");
  browser.csrf = hiddenCsrf.exec(await page.text())?.[1] ?? "";
  return browser;
}
