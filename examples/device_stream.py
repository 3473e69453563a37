"""A minimal device: stream a 16 kHz mono PCM16LE WAV file to voxwire over MQTT.

Only paho-mqtt and the standard library, as firmware authors would write it:

    python examples/device_stream.py talk.wav --url http://127.0.0.1:8000 \
        --broker 127.0.0.1 --port 1883 --key "$VOXWIRE_API_KEY"

1. POST /v1/streams opens a stream session (HTTP, with the API key).
2. Connect to the broker: username = the key id (the part after ``vxk_``),
   password = the key. Subscribe to ``transcription/<sid>/+`` (QoS 1).
3. Publish 100 ms chunks (3200 bytes) on ``audio/<sid>/chunk/<n>``, n = 0, 1, ...
4. Publish ``{"type": "end"}`` on ``audio/<sid>/control``; wait for "completed".
"""

import argparse
import json
import time
import urllib.request
import wave

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion


def open_stream(url: str, key: str) -> dict:
    request = urllib.request.Request(
        f"{url}/v1/streams",
        data=b"{}",
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("wav")
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--broker", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=1883)
    parser.add_argument("--key", required=True)
    args = parser.parse_args()

    stream = open_stream(args.url, args.key)
    sid = stream["sid"]
    done = False

    def on_message(_client, _userdata, msg):
        nonlocal done
        body = json.loads(msg.payload)
        if body["type"] == "final":
            print(f"{body['segment']['start_ms'] / 1000:7.2f}s  {body['segment']['text']}")
        elif body["type"] == "partial":
            print(f"          {body['segment']['text']} …")
        elif body["type"] == "progress" and body["status"] == "completed":
            done = True

    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"device-{sid}")
    client.username_pw_set(args.key.split("_")[1], args.key)
    client.on_message = on_message
    client.connect(args.broker, args.port)
    client.subscribe(f"transcription/{sid}/+", qos=1)
    client.loop_start()

    with wave.open(args.wav, "rb") as audio:
        if (audio.getframerate(), audio.getnchannels(), audio.getsampwidth()) != (16000, 1, 2):
            raise SystemExit("this example sends 16 kHz mono 16-bit WAV only")
        n = 0
        while chunk := audio.readframes(1600):  # 100 ms
            client.publish(f"{stream['audio_topic']}/{n}", chunk, qos=1)
            n += 1
            time.sleep(0.1)  # real time, as a microphone would
    client.publish(stream["control_topic"], json.dumps({"type": "end"}), qos=1)
    while not done:
        time.sleep(0.1)
    client.loop_stop()


if __name__ == "__main__":
    main()
