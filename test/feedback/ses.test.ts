import { describe, expect, it } from "vitest";
import { stringToSign, type SnsMessage } from "../../src/domain/feedback/sns";
import certificatePem from "../fixtures/sns/signing-cert.pem?raw";
import privateKeyPem from "../fixtures/sns/signing-key.pem?raw";
import { call, json } from "../helpers";
import { messageOf, sendBalance } from "../send/helpers";
import { addReceiverRule, receivedOn, receiverPath, receiverUrl } from "../webhooks/helpers";
import { rcpt, sender, sentMessage } from "./helpers";

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

  it("Complaint and Delivery notifications, matched by our Message-ID header when the envelope sender is SES's own", async () => {
    const { key, from } = await sender();
    const [happy, angry] = [rcpt("happy"), rcpt("angry")];
    const delivered = await sentMessage(key, from, happy);
    const complained = await sentMessage(key, from, angry);
    const sesSource = "0100019abc@amazonses.com";
    const withHeader = (sent: { messageIdHeader: string }, to: string) => ({
      ...mail(sesSource, to),
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
