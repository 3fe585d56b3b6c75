import { describe, expect, it } from "vitest";
import { stringToSign, type SnsMessage } from "../../src/domain/feedback/sns";
import certificatePem from "../fixtures/sns/signing-cert.pem?raw";
import privateKeyPem from "../fixtures/sns/signing-key.pem?raw";
import { call, json } from "../support/helpers";
import { messageOf, sendBalance } from "../support/sending";
import { addReceiverRule, receivedOn, receiverPath, receiverUrl } from "../support/webhooks";
import { rcpt, relayedMessage, sender, sentMessage, sentToMany } from "../support/feedback";

// A self-signed certificate stands in for Amazon's (test/fixtures/sns); the webhook receiver serves it the way
// sns.<region>.amazonaws.com serves SigningCertURL, from the origin SNS_TRUSTED_CERT_ORIGIN trusts in the tests.
const TOPIC = "arn:aws:sns:us-east-1:123456789012:ses-feedback";

async function certificateUrl(): Promise<string> {
  const path = `/sns/${crypto.randomUUID()}.pem`;
  await addReceiverRule({ path, status: 200, body: certificatePem });
  return receiverUrl(path);
}

async function sign(message: Omit<SnsMessage, "Signature">): Promise<SnsMessage> {
  const der = Uint8Array.from(atob(privateKeyPem.replace(/-----[^-]+-----|\s+/g, "")), (char) => char.charCodeAt(0));
  const hash = message.SignatureVersion === "1" ? "SHA-1" : "SHA-256";
  const key = await crypto.subtle.importKey("pkcs8", der, { name: "RSASSA-PKCS1-v1_5", hash }, false, ["sign"]);
  const signature = await crypto.subtle.sign("RSASSA-PKCS1-v1_5", key, new TextEncoder().encode(stringToSign({ ...message, Signature: "" })));
  return { ...message, Signature: btoa(String.fromCharCode(...new Uint8Array(signature))) };
}

async function notification(payload: Record<string, unknown>, version: "1" | "2" = "2") {
  return sign({
    Type: "Notification",
    MessageId: crypto.randomUUID(),
    TopicArn: TOPIC,
    Message: JSON.stringify(payload),
    Timestamp: new Date().toISOString(),
    SignatureVersion: version,
    SigningCertURL: await certificateUrl(),
  });
}

const post = (body: unknown) => call("/feedback/ses", { method: "POST", body, headers: { "Content-Type": "text/plain; charset=UTF-8" } });

const mail = (source: string, to: string) => ({
  timestamp: new Date().toISOString(),
  messageId: `0100019${crypto.randomUUID().replace(/-/g, "")}-000000`,
  source,
  destination: [to],
});

describe("POST /feedback/ses (SES through SNS)", () => {
  it("a Bounce notification (Permanent) bounces, suppresses and refunds the recipient; SHA1 and SHA256 signatures both verify", async () => {
    const { key, from } = await sender();
    for (const version of ["1", "2"] as const) {
      const to = rcpt(`gone${version}`);
      const sent = await sentMessage(key, from, to);
      const before = await sendBalance(key);
      const body = await notification(
        {
          notificationType: "Bounce",
          mail: mail(sent.returnPath, to),
          bounce: {
            bounceType: "Permanent",
            bounceSubType: "General",
            feedbackId: crypto.randomUUID(),
            bouncedRecipients: [{ emailAddress: to, action: "failed", status: "5.1.1", diagnosticCode: "smtp; 550 5.1.1 user unknown" }],
          },
        },
        version,
      );
      const response = await post(body);
      expect(response.status).toBe(200);
      expect(await json(response)).toEqual({ status: "recorded", recorded: 1, ignored: 0 });
      const message = await messageOf(key, sent.id);
      expect(message.recipients).toEqual([expect.objectContaining({ status: "bounced" })]);
      expect(message.events.find((event) => event.type === "relay.bounced")?.data).toMatchObject({
        bounce_type: "hard",
        feedback_source: "ses",
        smtp_code: 550,
      });
      expect(await sendBalance(key)).toBe(before + 1);
    }
  });

  it("a Bounce notification names one recipient's copy by its envelope sender: that recipient is bounced and refunded, the others it lists are not", async () => {
    const { key, from } = await sender();
    const [first, second] = [rcpt("first"), rcpt("second")];
    const sent = await sentToMany(key, from, [first, second]);
    const before = await sendBalance(key);
    const response = await post(
      await notification({
        notificationType: "Bounce",
        mail: { ...mail(sent.copies.get(first)!.mail_from, first), destination: [first, second] },
        bounce: {
          bounceType: "Permanent",
          bounceSubType: "General",
          feedbackId: crypto.randomUUID(),
          bouncedRecipients: [first, second].map((emailAddress) => ({
            emailAddress,
            status: "5.1.1",
            diagnosticCode: "smtp; 550 5.1.1 user unknown",
          })),
        },
      }),
    );
    expect(await json(response)).toEqual({ status: "recorded", recorded: 1, ignored: 0 });
    const message = await messageOf(key, sent.id);
    expect(Object.fromEntries(message.recipients.map((r) => [r.email, r.status]))).toEqual({ [first]: "bounced", [second]: "sent" });
    // A signed SES notification is verified evidence: its bounce refunds, unlike a mailed report.
    expect(await sendBalance(key)).toBe(before + 1);
  });

  it("Complaint and Delivery notifications, matched by our Message-ID header when the envelope sender is the From address (no BOUNCE_DOMAIN)", async () => {
    const { key, from, domain } = await sender();
    const [happy, angry] = [rcpt("happy"), rcpt("angry")];
    const delivered = await sentMessage(key, from, happy);
    const complained = await sentMessage(key, from, angry);
    const withHeader = (sent: { messageIdHeader: string }, to: string) => ({
      ...mail(`hello@${domain.name}`, to),
      commonHeaders: { messageId: sent.messageIdHeader },
    });

    expect(
      (
        await post(
          await notification({
            notificationType: "Delivery",
            mail: withHeader(delivered, happy),
            delivery: { recipients: [happy], smtpResponse: "250 2.0.0 OK" },
          }),
        )
      ).status,
    ).toBe(200);
    expect(
      (
        await post(
          await notification({
            notificationType: "Complaint",
            mail: withHeader(complained, angry),
            complaint: { complainedRecipients: [{ emailAddress: angry }], complaintFeedbackType: "abuse", feedbackId: crypto.randomUUID() },
          }),
        )
      ).status,
    ).toBe(200);
    expect((await messageOf(key, delivered.id)).recipients[0]?.status).toBe("delivered");
    const message = await messageOf(key, complained.id);
    expect(message.recipients[0]?.status).toBe("complained");
    expect(message.events.map((event) => event.type)).toContain("relay.complained");
  });

  it("a relay message of another account carrying our message's Message-ID: SES notifications about it change nothing of ours", async () => {
    const victim = await sender();
    const to = rcpt("shared");
    const sent = await sentMessage(victim.key, victim.from, to);
    const before = await sendBalance(victim.key);

    // The attacker copies the Message-ID of a mail they received and relays their own mail to the same address with it.
    const attacker = await sender();
    const attackerAddress = `app@${attacker.domain.name}`;
    await relayedMessage(
      attacker.key,
      attackerAddress,
      to,
      `From: ${attackerAddress}\r\nTo: ${to}\r\nSubject: Look-alike\r\nMessage-ID: ${sent.messageIdHeader}\r\n\r\nHello\r\n`,
    );

    // Without BOUNCE_DOMAIN SES reports the attacker's From address as the source; other sources are what a
    // notification without a usable envelope sender may carry.
    const answers: unknown[] = [];
    for (const source of [attackerAddress, "0100019abc@amazonses.com", undefined]) {
      const { source: _, ...withoutSource } = mail(attackerAddress, to);
      const original = { ...(source ? { ...withoutSource, source } : withoutSource), commonHeaders: { messageId: sent.messageIdHeader } };
      for (const payload of [
        {
          notificationType: "Bounce",
          mail: original,
          bounce: { bounceType: "Permanent", feedbackId: crypto.randomUUID(), bouncedRecipients: [{ emailAddress: to, status: "5.1.1" }] },
        },
        {
          notificationType: "Complaint",
          mail: original,
          complaint: { complainedRecipients: [{ emailAddress: to }], complaintFeedbackType: "abuse", feedbackId: crypto.randomUUID() },
        },
      ]) {
        const response = await post(await notification(payload));
        expect(response.status).toBe(200);
        answers.push(await json(response));
      }
    }

    const message = await messageOf(victim.key, sent.id);
    expect(message.status).toBe("sent");
    expect(message.recipients).toEqual([expect.objectContaining({ email: to, status: "sent" })]);
    expect(message.events.map((event) => event.type)).toEqual(["relay.sent"]);
    expect(await sendBalance(victim.key)).toBe(before);
    const suppressions = await json<{ data: unknown[] }>(await call(`/api/v1/suppressions?email=${encodeURIComponent(to)}`, { key: victim.key }));
    expect(suppressions.data).toEqual([]);
    expect(answers).toEqual(Array(6).fill({ status: "ignored", reason: "not one of our messages" }));
  });

  it("a Message-ID names a message only if that message left with it, from the notification's envelope sender, to the recipients it names", async () => {
    const { key, domain } = await sender();
    const address = `app@${domain.name}`;
    const relayRaw = (to: string, header = "") => `From: ${address}\r\nTo: ${to}\r\nSubject: Relayed\r\n${header}\r\nHello\r\n`;
    const complaint = (to: string, messageIdHeader: string, destination = [to]) =>
      notification({
        notificationType: "Complaint",
        mail: { ...mail(address, to), destination, commonHeaders: { messageId: messageIdHeader } },
        complaint: { complainedRecipients: [{ emailAddress: to }], complaintFeedbackType: "abuse", feedbackId: crypto.randomUUID() },
      });

    // Relayed without a Message-ID, it left with ours: matched.
    const bare = rcpt("bare");
    const ours = await relayedMessage(key, address, bare, relayRaw(bare));
    expect(ours.messageIdHeader).toBe(`<${ours.id}@${domain.name}>`);
    expect(await json(await post(await complaint(bare, ours.messageIdHeader)))).toEqual({ status: "recorded", recorded: 1, ignored: 0 });
    expect((await messageOf(key, ours.id)).recipients[0]?.status).toBe("complained");

    // Relayed with a Message-ID of its own, it never left with `<msg_…@domain>`: a notification naming it so is not about it.
    const own = rcpt("own");
    const relayed = await relayedMessage(key, address, own, relayRaw(own, "Message-ID: <custom-1@client.example>\r\n"));
    expect(relayed.messageIdHeader).toBe("<custom-1@client.example>");
    // Sent through the API: the Message-ID's domain must be the From domain, and the recipients the message's.
    const api = rcpt("api");
    const sent = await sentMessage(key, `Acme <${address}>`, api);
    const ignored = [
      await post(await complaint(own, `<${relayed.id}@${domain.name}>`)),
      await post(await complaint(api, `<${sent.id}@elsewhere.example>`)),
      await post(await complaint(api, sent.messageIdHeader, [api, rcpt("stranger")])),
    ];
    for (const response of ignored) expect(await json(response)).toMatchObject({ status: "ignored" });
    expect((await messageOf(key, relayed.id)).recipients[0]?.status).toBe("sent");
    expect((await messageOf(key, sent.id)).recipients[0]?.status).toBe("sent");

    // The same notification with the message's own recipients is believed.
    expect(await json(await post(await complaint(api, sent.messageIdHeader)))).toMatchObject({ status: "recorded", recorded: 1 });
  });

  it("a notification with a bad signature, from another topic or with a foreign certificate URL is refused with 403 and changes nothing", async () => {
    const { key, from } = await sender();
    const to = rcpt("victim");
    const sent = await sentMessage(key, from, to);
    const payload = {
      notificationType: "Bounce",
      mail: mail(sent.returnPath, to),
      bounce: { bounceType: "Permanent", bouncedRecipients: [{ emailAddress: to, status: "5.1.1" }] },
    };
    const good = await notification(payload);
    const tampered = { ...good, Message: good.Message.replace("Permanent", "Permanent ") };
    const otherTopic = await sign({ ...good, TopicArn: "arn:aws:sns:us-east-1:999999999999:evil" });
    const foreignCert = await sign({ ...good, SigningCertURL: "https://evil.example.com/cert.pem" });
    const httpAmazon = await sign({ ...good, SigningCertURL: "http://sns.us-east-1.amazonaws.com/cert.pem" });
    for (const body of [tampered, { ...good, Signature: "AAAA" }, otherTopic, foreignCert, httpAmazon]) {
      const response = await post(body);
      expect(response.status).toBe(403);
      expect(await json(response)).toMatchObject({ code: "forbidden" });
    }
    expect((await post({ hello: "world" })).status).toBe(422);
    expect((await call("/feedback/ses", { method: "POST", body: "not json{", headers: { "Content-Type": "text/plain" } })).status).toBe(422);
    expect((await messageOf(key, sent.id)).recipients[0]?.status).toBe("sent");
  });

  it("confirms a subscription by fetching its SubscribeURL", async () => {
    const path = receiverPath();
    await addReceiverRule({ path, status: 200, body: "<ConfirmSubscriptionResponse/>" });
    const body = await sign({
      Type: "SubscriptionConfirmation",
      MessageId: crypto.randomUUID(),
      TopicArn: TOPIC,
      Message: "You have chosen to subscribe to the topic.",
      Token: "2336412f37fb687f5d51e6e2425f004aed",
      SubscribeURL: `${receiverUrl(path)}?Action=ConfirmSubscription&Token=2336412f37fb687f5d51e6e2425f004aed`,
      Timestamp: new Date().toISOString(),
      SignatureVersion: "1",
      SigningCertURL: await certificateUrl(),
    });
    const response = await post(body);
    expect(response.status).toBe(200);
    expect(await json(response)).toEqual({ status: "subscription confirmed" });
    expect((await receivedOn(path)).map((request) => request.method)).toEqual(["GET"]);
  });
});
