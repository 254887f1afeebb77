"""TF Serving's own Python client (PyPI: tensorflow-serving-api, with tensorflow-cpu; the venv
deploy/install_deps.sh makes) against the real rnnserve binary, unchanged: PredictionService
Predict with tensor_content (tf.make_tensor_proto) and with float_val, GetModelMetadata's
signature_def, ModelService GetModelStatus, and the errors a TF Serving client sees. Outputs are
compared with Keras's own predictions of the example model (tests/fixtures/example/expected.npy,
made by models/scripts/make_example.py), rtol 1e-5.

Case names match tfserving_test.cc's where they test the same thing."""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_process  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True, help="the rnnserve binary")
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import grpc
        import numpy as np
        import tensorflow as tf
        from tensorflow_serving.apis import (get_model_metadata_pb2, get_model_status_pb2,
                                             classification_pb2, model_service_pb2_grpc,
                                             predict_pb2, prediction_service_pb2_grpc)
    except ImportError as e:
        server_process.skip(f"tensorflow-serving-api is not importable here ({e}); "
                            "deploy/install_deps.sh makes its venv (/opt/tfserving-client)")

    src = args.source_dir
    x = np.load(os.path.join(src, "tests/fixtures/example/input.npy")).astype(np.float32)
    want = np.load(os.path.join(src, "tests/fixtures/example/expected.npy"))
    failures, passed = [], []

    def check(name, ok, detail=""):
        print(f"{'PASS' if ok else 'FAIL'} {name} {detail}", flush=True)
        (passed if ok else failures).append(name)

    def close(got):
        return got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-6)

    repo = os.path.join(src, "models/examples")
    metrics_port = server_process.free_port()
    with server_process.running_server(args.server, repo,
                                       extra=["--metrics-port", str(metrics_port)]) as address:
        channel = grpc.insecure_channel(address)
        predict = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        models = model_service_pb2_grpc.ModelServiceStub(channel)

        request = predict_pb2.PredictRequest()
        request.model_spec.name = "waveform_lstm"
        request.model_spec.signature_name = "serving_default"
        request.inputs["waveform"].CopyFrom(tf.make_tensor_proto(x))
        response = predict.Predict(request, timeout=30)
        got = tf.make_ndarray(response.outputs["probabilities"])
        check("PredictTensorContentMatchesKeras",
              request.inputs["waveform"].tensor_content != b"" and close(got),
              f"max abs diff {np.max(np.abs(got - want))}")
        check("PredictAnswersModelSpec", response.model_spec.name == "waveform_lstm"
              and response.model_spec.version.value == 1
              and response.model_spec.signature_name == "serving_default", response.model_spec)

        request = predict_pb2.PredictRequest()
        request.model_spec.name = "waveform_lstm"
        request.model_spec.version.value = 1
        tensor = request.inputs["waveform"]
        tensor.dtype = tf.float32.as_datatype_enum
        for d in x.shape:
            tensor.tensor_shape.dim.add().size = d
        tensor.float_val.extend(x.ravel().tolist())
        got = tf.make_ndarray(predict.Predict(request, timeout=30).outputs["probabilities"])
        check("PredictFloatValMatchesKeras", close(got), f"max abs diff {np.max(np.abs(got - want))}")

        meta_request = get_model_metadata_pb2.GetModelMetadataRequest()
        meta_request.model_spec.name = "waveform_lstm"
        meta_request.metadata_field.append("signature_def")
        meta = predict.GetModelMetadata(meta_request, timeout=30)
        sigs = get_model_metadata_pb2.SignatureDefMap()
        meta.metadata["signature_def"].Unpack(sigs)
        sig = sigs.signature_def["serving_default"]
        inp = sig.inputs["waveform"]
        check("GetModelMetadataHasServingDefaultSignature",
              sig.method_name == "tensorflow/serving/predict"
              and inp.name == "serving_default_waveform:0"
              and inp.dtype == tf.float32.as_datatype_enum
              and [d.size for d in inp.tensor_shape.dim] == [-1, -1, 2]
              and sig.outputs["probabilities"].name == "StatefulPartitionedCall:0"
              and [d.size for d in sig.outputs["probabilities"].tensor_shape.dim] == [-1, 3],
              sig)

        status_request = get_model_status_pb2.GetModelStatusRequest()
        status_request.model_spec.name = "waveform_lstm"
        status = models.GetModelStatus(status_request, timeout=30)
        v = status.model_version_status
        check("GetModelStatusListsAvailableVersions",
              len(v) == 1 and v[0].version == 1
              and v[0].state == get_model_status_pb2.ModelVersionStatus.AVAILABLE
              and v[0].status.error_code == 0, status)

        # TF Serving's calls are counted in the model's metrics like every front end's, under
        # the version they name (an Int64Value in TF Serving's ModelSpec).
        import urllib.request
        page = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                      timeout=10).read().decode()
        line = ('rnnserve_requests_total{code="OK",method="Predict",model="waveform_lstm",'
                'version="1"} ')
        counted = [float(l[len(line):]) for l in page.splitlines() if l.startswith(line)]
        check("PredictsAreCountedInTheModelsMetrics", counted and counted[0] >= 2, counted)

        def code_of(call):
            try:
                call()
                return None, ""
            except grpc.RpcError as e:
                return e.code(), e.details()

        request = predict_pb2.PredictRequest()
        request.model_spec.name = "waveform_lstm"
        request.model_spec.signature_name = "classify"
        request.inputs["waveform"].CopyFrom(tf.make_tensor_proto(x))
        code, details = code_of(lambda: predict.Predict(request, timeout=30))
        check("UnknownSignatureIsInvalidArgument",
              code == grpc.StatusCode.INVALID_ARGUMENT and "serving_default" in details, details)

        request.model_spec.signature_name = ""
        request.inputs["waveform"].CopyFrom(tf.make_tensor_proto(x.astype(np.float64)))
        code, details = code_of(lambda: predict.Predict(request, timeout=30))
        check("DoubleForFloatIsInvalidArgument",
              code == grpc.StatusCode.INVALID_ARGUMENT and "waveform" in details, details)

        request.model_spec.name = "no_such_model"
        code, details = code_of(lambda: predict.Predict(request, timeout=30))
        check("UnknownModelIsNotFound", code == grpc.StatusCode.NOT_FOUND, details)

        classify = classification_pb2.ClassificationRequest()
        classify.model_spec.name = "waveform_lstm"
        code, details = code_of(lambda: predict.Classify(classify, timeout=30))
        check("UnservedRpcsSayWhatToUseInstead",
              code == grpc.StatusCode.UNIMPLEMENTED and "Predict" in details, details)
        channel.close()

    print(f"{len(passed)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
