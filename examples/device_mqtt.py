"""A device that speaks only MQTT: open a live stream, stream a 16 kHz mono
PCM16LE WAV file, end it and read the transcript, with no HTTP at all.

Only paho-mqtt and the standard library, as firmware authors would write it:

    python examples/device_mqtt.py talk.wav --broker 127.0.0.1 --port 1883 \
        --key "$VOXWIRE_API_KEY" [--prompt budget="the budget"]

1. Connect to the broker: username = the key id (the part after ``vxk_``),
   password = the key. Or, on Mosquitto's client-certificate listener, with
   the device's certificate and no password (``voxwire keys create --device
   NAME --cert-out DIR`` wrote DIR/device.crt and DIR/device.key; the
   certificate's common name is the key id):

       python examples/device_mqtt.py talk.wav --port 18884 --cert DIR \
           --key-id 1a2b3c4d --ca .services/mosquitto/tls/ca.crt
2. Subscribe to ``query/<key id>/<qid>/result`` and publish
   ``{"op": "open_stream", "stream": {...}}`` (the fields of ``POST /v1/streams``)
   on ``query/<key id>/<qid>/request``. The answer names the session (``sid``)
   and its audio topics. Asking again with the same qid answers with the same
   stream, so a device that lost the answer simply asks again.
3. Subscribe to ``transcription/<sid>/+``; publish 100 ms chunks (3200 bytes)
   on ``audio/<sid>/chunk/<n>``, n = 0, 1, ...; then ``{"type": "end"}`` on
   ``audio/<sid>/control``, and wait for the "completed" progress message.
4. Ask ``{"op": "transcript", "sid": ...}`` the same way, and print it.

With ``--upload`` it sends a recorded file instead (any format the platform
decodes), in parts, resumably:

    python examples/device_mqtt.py meeting.m4a --upload --key "$VOXWIRE_API_KEY"

1. The upload id is made from the file's SHA-256, so a device that lost its
   connection and starts again continues the same upload.
2. Ask ``{"op": "upload_status", "upload": ...}``: the parts already held.
3. Publish the others, 64 KiB each, on ``query/<key id>/<upload id>/part/<n>``.
4. Ask ``{"op": "finish_upload", "upload": ..., "parts": N, "sha256": ...}``
   (with the options of an upload: ``POST /v1/sessions``): the answer names the session.
   Parts still on their way are named as missing: ask again a moment later.
5. Follow ``transcription/<sid>/+`` to "completed" and read the transcript.
"""

import argparse
import hashlib
import json
import queue
import secrets
import ssl
import sys
import time
import wave

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion


class Device:
    def __init__(self, broker: str, port: int, args: argparse.Namespace) -> None:
        self.key_id = args.key.split("_")[1] if args.key else args.key_id
        self.answers: queue.Queue = queue.Queue()
        self.completed = False
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"device-{self.key_id}")
        if args.cert:  # TLS with the device's certificate: no username, no password
            self.client.tls_set(
                ca_certs=args.ca,
                certfile=f"{args.cert}/device.crt",
                keyfile=f"{args.cert}/device.key",
                cert_reqs=ssl.CERT_REQUIRED,
            )
        else:
            if args.ca:
                self.client.tls_set(ca_certs=args.ca, cert_reqs=ssl.CERT_REQUIRED)
            self.client.username_pw_set(self.key_id, args.key)
        self.client.on_message = self.on_message
        self.client.connect(broker, port)
        self.client.loop_start()

    def on_message(self, _client, _userdata, msg) -> None:
        body = json.loads(msg.payload)
        if msg.topic.startswith("query/"):
            self.answers.put(body)
        elif body["type"] == "final":
            print(f"{body['segment']['start_ms'] / 1000:7.2f}s  {body['segment']['text']}")
        elif body["type"] == "match":
            print(f"  match {body['prompt_id']}: {body['text']}")
        elif body["type"] == "progress" and body["status"] == "completed":
            self.completed = True
        elif body["type"] == "error":
            print(f"error: {body['code']}: {body['message']}", file=sys.stderr)

    def ask(self, request: dict, timeout: float = 30, errors: bool = False) -> dict:
        """Publish a request on this key's query topics; return its answer (an
        error ends the program, unless ``errors``)."""
        qid = secrets.token_hex(8)
        base = f"query/{self.key_id}/{qid}"
        self.client.subscribe(f"{base}/result", qos=1)
        time.sleep(0.2)  # the subscription first (the answer is retained anyway)
        self.client.publish(f"{base}/request", json.dumps(request), qos=1)
        answer = self.answers.get(timeout=timeout)
        self.client.unsubscribe(f"{base}/result")
        if answer.get("error") and not errors:
            raise SystemExit(f"{answer['error']['code']}: {answer['error']['message']}")
        return answer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("wav")
    parser.add_argument("--broker", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=1883)
    parser.add_argument("--key", help="the device's key: username its id, password the key")
    parser.add_argument("--cert", metavar="DIR", help="connect with DIR/device.crt and device.key")
    parser.add_argument("--key-id", help="with --cert: the key id (the certificate's CN)")
    parser.add_argument("--ca", help="TLS: the CA that signed the broker's certificate")
    parser.add_argument("--prompt", action="append", default=[], help="ID=TEXT, standing prompt")
    parser.add_argument("--fast", action="store_true", help="do not wait 100 ms between chunks")
    parser.add_argument("--upload", action="store_true", help="upload the file in parts")
    parser.add_argument("--stop-after", type=int, help="with --upload: stop after N parts")
    args = parser.parse_args()
    if not (args.key or (args.cert and args.key_id)):
        parser.error("give --key, or --cert DIR with --key-id")

    prompts = [dict(zip(("id", "text"), p.split("=", 1), strict=True)) for p in args.prompt]
    device = Device(args.broker, args.port, args)
    if args.upload:
        sid = upload(device, args.wav, prompts, args.stop_after)
        device.client.subscribe(f"transcription/{sid}/+", qos=1)
        follow(device, sid)
        return
    stream = device.ask({"op": "open_stream", "stream": {"prompts": prompts}})["stream"]
    sid = stream["sid"]
    print(f"stream {sid}")
    device.client.subscribe(f"transcription/{sid}/+", qos=1)
    time.sleep(0.2)
    with wave.open(args.wav, "rb") as audio:
        if (audio.getframerate(), audio.getnchannels(), audio.getsampwidth()) != (16000, 1, 2):
            raise SystemExit("this example sends 16 kHz mono 16-bit WAV only")
        n = 0
        while chunk := audio.readframes(1600):  # 100 ms
            device.client.publish(f"{stream['audio_topic']}/{n}", chunk, qos=1)
            n += 1
            time.sleep(0 if args.fast else 0.1)  # real time, as a microphone would
    device.client.publish(stream["control_topic"], json.dumps({"type": "end"}), qos=1)
    follow(device, sid)


def follow(device: Device, sid: str) -> None:
    """Wait for the session to complete; print its transcript."""
    deadline = time.monotonic() + 120
    while not device.completed and time.monotonic() < deadline:
        time.sleep(0.1)
    if not device.completed:
        raise SystemExit("the session did not complete within 120 s")
    transcript = device.ask({"op": "transcript", "sid": sid})["transcript"]
    print(f"transcript ({len(transcript['segments'])} segments): {transcript['text']}")
    device.client.loop_stop()


def upload(device: Device, path: str, prompts: list, stop_after: int | None) -> str:
    """Upload the file at ``path`` in parts, going on from the parts already
    held; return the session's sid."""
    with open(path, "rb") as file:
        data = file.read()
    digest = hashlib.sha256(data).hexdigest()
    upload_id = "f" + digest[:24]
    size = 64 * 1024
    parts = [data[i : i + size] for i in range(0, len(data), size)]
    finish = {"op": "finish_upload", "upload": upload_id, "parts": len(parts), "sha256": digest}
    finish |= {"filename": path.rsplit("/", 1)[-1], "prompts": prompts}
    sent = 0
    for _ in range(10):
        held = set(device.ask({"op": "upload_status", "upload": upload_id})["upload"]["parts"])
        missing = [n for n in range(len(parts)) if n not in held]
        print(f"upload {upload_id}: {len(held)} of {len(parts)} parts held, sending {len(missing)}")
        for n in missing:
            if stop_after is not None and sent >= stop_after:
                device.client.disconnect()
                raise SystemExit(f"stopped after {sent} parts, as asked")
            topic = f"query/{device.key_id}/{upload_id}/part/{n}"
            device.client.publish(topic, parts[n], qos=1).wait_for_publish(30)
            sent += 1
        answer = device.ask(finish, errors=True)
        if "session" in answer:
            print(f"session {answer['session']['sid']}")
            return answer["session"]["sid"]
        if "have not arrived" not in answer["error"]["message"]:
            raise SystemExit(f"{answer['error']['code']}: {answer['error']['message']}")
        time.sleep(1)  # parts still on their way
    raise SystemExit("the upload could not be finished")


if __name__ == "__main__":
    main()
