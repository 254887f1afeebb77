#pragma once

// The descriptors of TF Serving's gRPC services (proto/tensorflow_serving/apis/
// prediction_service.proto, model_service.proto), for tests that walk every method of every
// served service. Their generated files hold no message a test uses, so nothing would link
// them: naming their descriptor tables (in a volatile, which the compiler keeps) does. Link
// rnnserve_tfserving_proto.

#include <google/protobuf/descriptor.h>

#include "tensorflow_serving/apis/model_service.pb.h"
#include "tensorflow_serving/apis/prediction_service.pb.h"

namespace rnnserve::testing {

// "tensorflow.serving.PredictionService" or "tensorflow.serving.ModelService".
inline const google::protobuf::ServiceDescriptor* TfServingService(const char* full_name) {
  const void* volatile linked[] = {
      &descriptor_table_tensorflow_5fserving_2fapis_2fprediction_5fservice_2eproto,
      &descriptor_table_tensorflow_5fserving_2fapis_2fmodel_5fservice_2eproto};
  (void)linked;
  return google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(full_name);
}

}  // namespace rnnserve::testing
