"""The official tritonclient (PyPI: tritonclient[grpc]) against the real rnnserve binary:
server and model metadata, model config, statistics, and inference on the example model with
Keras's own numbers (tests/fixtures/example/expected.npy, rtol 1e-5)."""

import argparse
import os
import queue
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_process  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True, help="the rnnserve binary")
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()
    try:
        import numpy as np
        import tritonclient.grpc as grpcclient
        from tritonclient.utils import InferenceServerException
    except ImportError as e:
        server_process.skip(f"tritonclient[grpc] is not installed ({e}); "
                           "pip install 'tritonclient[grpc]'")

    src = args.source_dir
    x = np.load(os.path.join(src, "tests/fixtures/example/input.npy")).astype(np.float32)
    want = np.load(os.path.join(src, "tests/fixtures/example/expected.npy"))
    failures = []
    passed = []

    def check(name, ok, detail=""):
        print(f"{'PASS' if ok else 'FAIL'} {name} {detail}", flush=True)
        (passed if ok else failures).append(name)

    with server_process.running_server(args.server, os.path.join(src, "models/examples")) as url:
        client = grpcclient.InferenceServerClient(url)
        check("ServerIsLiveAndReady", client.is_server_live() and client.is_server_ready())
        check("ModelIsReady", client.is_model_ready("waveform_lstm"))
        meta = client.get_server_metadata(as_json=True)
        check("ServerMetadataListsStatistics", "statistics" in meta.get("extensions", []), meta)
        mm = client.get_model_metadata("waveform_lstm", as_json=True)
        check("ModelMetadataDescribesWaveform",
              mm["inputs"][0]["name"] == "waveform" and mm["inputs"][0]["datatype"] == "FP32"
              and [int(d) for d in mm["inputs"][0]["shape"]] == [-1, -1, 2], mm)
        cfg = client.get_model_config("waveform_lstm", as_json=True)["config"]
        check("ModelConfigHasMaxBatchSizeAndDims",
              int(cfg["max_batch_size"]) == 64
              and [int(d) for d in cfg["input"][0]["dims"]] == [-1, 2], cfg)

        inp = grpcclient.InferInput("waveform", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        out = grpcclient.InferRequestedOutput("probabilities")
        got = client.infer("waveform_lstm", [inp], outputs=[out]).as_numpy("probabilities")
        check("InferMatchesKeras", got is not None and got.shape == want.shape
              and np.allclose(got, want, rtol=1e-5, atol=1e-6),
              f"max abs diff {np.max(np.abs(got - want)) if got is not None else 'n/a'}")

        lengths = grpcclient.InferInput("lengths", [3], "INT32")
        lengths.set_data_from_numpy(np.array([40, 25, 12], dtype=np.int32))
        got = client.infer("waveform_lstm", [inp, lengths]).as_numpy("probabilities")
        check("InferWithLengthsInputMatchesKeras", np.allclose(got, want, rtol=1e-5, atol=1e-6))

        bad = grpcclient.InferInput("waveform", [1, 4, 3], "FP32")
        bad.set_data_from_numpy(np.zeros((1, 4, 3), np.float32))
        try:
            client.infer("waveform_lstm", [bad])
            check("WrongShapeIsInvalidArgument", False, "no error")
        except InferenceServerException as e:
            check("WrongShapeIsInvalidArgument",
                  "INVALID_ARGUMENT" in str(e.status()) and "expected [?,?,2]" in e.message(),
                  f"{e.status()} {e.message()}")
        try:
            client.infer("no_such_model", [inp])
            check("UnknownModelIsNotFound", False, "no error")
        except InferenceServerException as e:
            check("UnknownModelIsNotFound", "NOT_FOUND" in str(e.status()), e.message())

        # The stream answers each request; a sequence request must carry one sequence, and
        # this one carries three.
        results = queue.Queue()
        client.start_stream(callback=lambda result, error: results.put((result, error)))
        client.async_stream_infer("waveform_lstm", [inp], request_id="plain")
        client.async_stream_infer("waveform_lstm", [inp], request_id="seq", sequence_id=7,
                                  sequence_start=True)
        first = results.get(timeout=30)
        second = results.get(timeout=30)
        client.stop_stream()
        check("StreamInferMatchesKeras", first[1] is None and np.allclose(
            first[0].as_numpy("probabilities"), want, rtol=1e-5, atol=1e-6), first[1])
        check("StreamSequenceOfThreeIsInvalidArgument",
              second[1] is not None and "INVALID_ARGUMENT" in str(second[1]), second[1])

        # Triton's extensions rnnserve does not serve: UNIMPLEMENTED saying what to use.
        for name, call, instead in (
                ("SystemSharedMemory", lambda: client.register_system_shared_memory(
                    "r", "/rnnserve_test", 64), "raw_input_contents"),
                ("CudaSharedMemory", lambda: client.get_cuda_shared_memory_status(),
                 "raw_input_contents"),
                ("TraceSetting", lambda: client.get_trace_settings(), "/metrics"),
                ("LogSettings", lambda: client.get_log_settings(), "--log-level")):
            try:
                call()
                check(f"{name}IsUnimplementedWithAdvice", False, "no error")
            except InferenceServerException as e:
                check(f"{name}IsUnimplementedWithAdvice", "UNIMPLEMENTED" in str(e.status())
                      and instead in e.message(), f"{e.status()} {e.message()}")

        stats = client.get_inference_statistics("waveform_lstm", as_json=True)
        ms = stats["model_stats"][0]
        check("StatisticsCountInferences", int(ms.get("inference_count", 0)) >= 9
              and int(ms["inference_stats"]["fail"]["count"]) >= 2, ms)

    print(f"{len(passed)} passed, {len(failures)} failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
