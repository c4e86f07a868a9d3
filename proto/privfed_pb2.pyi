from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Mechanism(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MECHANISM_UNSPECIFIED: _ClassVar[Mechanism]
    MECHANISM_PM: _ClassVar[Mechanism]
    MECHANISM_DUCHI: _ClassVar[Mechanism]
    MECHANISM_LAPLACE: _ClassVar[Mechanism]
    MECHANISM_HM: _ClassVar[Mechanism]

class LabelScheme(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LABEL_SCHEME_UNSPECIFIED: _ClassVar[LabelScheme]
    LABEL_SCHEME_CLEAR: _ClassVar[LabelScheme]
    LABEL_SCHEME_RR: _ClassVar[LabelScheme]
    LABEL_SCHEME_JOINT: _ClassVar[LabelScheme]

class GradientMechanism(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    GRADIENT_MECHANISM_UNSPECIFIED: _ClassVar[GradientMechanism]
    GRADIENT_MECHANISM_PM: _ClassVar[GradientMechanism]
    GRADIENT_MECHANISM_HM: _ClassVar[GradientMechanism]
    GRADIENT_MECHANISM_DUCHI: _ClassVar[GradientMechanism]
    GRADIENT_MECHANISM_LAPLACE: _ClassVar[GradientMechanism]

class RowScaling(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROW_SCALING_UNSPECIFIED: _ClassVar[RowScaling]
    ROW_SCALING_BALL: _ClassVar[RowScaling]
    ROW_SCALING_NORMALISE: _ClassVar[RowScaling]
    ROW_SCALING_BOX: _ClassVar[RowScaling]

class SvmModel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SVM_MODEL_UNSPECIFIED: _ClassVar[SvmModel]
    SVM_MODEL_CENTROID: _ClassVar[SvmModel]
    SVM_MODEL_MC_HUBER: _ClassVar[SvmModel]
    SVM_MODEL_SOFTMAX: _ClassVar[SvmModel]
    SVM_MODEL_OVR_HUBER: _ClassVar[SvmModel]

class BaseLearner(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BASE_LEARNER_UNSPECIFIED: _ClassVar[BaseLearner]
    BASE_LEARNER_STUMP: _ClassVar[BaseLearner]
    BASE_LEARNER_NCC: _ClassVar[BaseLearner]
    BASE_LEARNER_LR: _ClassVar[BaseLearner]

class ShareGroups(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SHARE_GROUPS_UNSPECIFIED: _ClassVar[ShareGroups]
    SHARE_GROUPS_DISJOINT: _ClassVar[ShareGroups]
    SHARE_GROUPS_ALL: _ClassVar[ShareGroups]

class EvalGroups(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVAL_GROUPS_UNSPECIFIED: _ClassVar[EvalGroups]
    EVAL_GROUPS_DISJOINT: _ClassVar[EvalGroups]
    EVAL_GROUPS_ALL: _ClassVar[EvalGroups]

class BudgetSplit(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BUDGET_SPLIT_UNSPECIFIED: _ClassVar[BudgetSplit]
    BUDGET_SPLIT_EPSILON: _ClassVar[BudgetSplit]
    BUDGET_SPLIT_OWNERS: _ClassVar[BudgetSplit]

class EvalMechanism(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVAL_MECHANISM_UNSPECIFIED: _ClassVar[EvalMechanism]
    EVAL_MECHANISM_LAPLACE: _ClassVar[EvalMechanism]
    EVAL_MECHANISM_RR: _ClassVar[EvalMechanism]

class StumpEncoding(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STUMP_ENCODING_UNSPECIFIED: _ClassVar[StumpEncoding]
    STUMP_ENCODING_SIGNS: _ClassVar[StumpEncoding]
    STUMP_ENCODING_CELLS: _ClassVar[StumpEncoding]
    STUMP_ENCODING_PAIR: _ClassVar[StumpEncoding]
    STUMP_ENCODING_TABLE: _ClassVar[StumpEncoding]

class FrequencyOracle(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FREQUENCY_ORACLE_UNSPECIFIED: _ClassVar[FrequencyOracle]
    FREQUENCY_ORACLE_KRR: _ClassVar[FrequencyOracle]
    FREQUENCY_ORACLE_OUE: _ClassVar[FrequencyOracle]
    FREQUENCY_ORACLE_OLH: _ClassVar[FrequencyOracle]

class RefusalCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REFUSAL_CODE_UNSPECIFIED: _ClassVar[RefusalCode]
    REFUSAL_CODE_BUDGET_EXCEEDED: _ClassVar[RefusalCode]
    REFUSAL_CODE_INVALID_TASK: _ClassVar[RefusalCode]
    REFUSAL_CODE_DUPLICATE_TASK: _ClassVar[RefusalCode]
    REFUSAL_CODE_ALREADY_RELEASED: _ClassVar[RefusalCode]
    REFUSAL_CODE_POLICY: _ClassVar[RefusalCode]
    REFUSAL_CODE_INTERNAL: _ClassVar[RefusalCode]
    REFUSAL_CODE_SCHEMA_MISMATCH: _ClassVar[RefusalCode]
    REFUSAL_CODE_UNOPENED: _ClassVar[RefusalCode]
MECHANISM_UNSPECIFIED: Mechanism
MECHANISM_PM: Mechanism
MECHANISM_DUCHI: Mechanism
MECHANISM_LAPLACE: Mechanism
MECHANISM_HM: Mechanism
LABEL_SCHEME_UNSPECIFIED: LabelScheme
LABEL_SCHEME_CLEAR: LabelScheme
LABEL_SCHEME_RR: LabelScheme
LABEL_SCHEME_JOINT: LabelScheme
GRADIENT_MECHANISM_UNSPECIFIED: GradientMechanism
GRADIENT_MECHANISM_PM: GradientMechanism
GRADIENT_MECHANISM_HM: GradientMechanism
GRADIENT_MECHANISM_DUCHI: GradientMechanism
GRADIENT_MECHANISM_LAPLACE: GradientMechanism
ROW_SCALING_UNSPECIFIED: RowScaling
ROW_SCALING_BALL: RowScaling
ROW_SCALING_NORMALISE: RowScaling
ROW_SCALING_BOX: RowScaling
SVM_MODEL_UNSPECIFIED: SvmModel
SVM_MODEL_CENTROID: SvmModel
SVM_MODEL_MC_HUBER: SvmModel
SVM_MODEL_SOFTMAX: SvmModel
SVM_MODEL_OVR_HUBER: SvmModel
BASE_LEARNER_UNSPECIFIED: BaseLearner
BASE_LEARNER_STUMP: BaseLearner
BASE_LEARNER_NCC: BaseLearner
BASE_LEARNER_LR: BaseLearner
SHARE_GROUPS_UNSPECIFIED: ShareGroups
SHARE_GROUPS_DISJOINT: ShareGroups
SHARE_GROUPS_ALL: ShareGroups
EVAL_GROUPS_UNSPECIFIED: EvalGroups
EVAL_GROUPS_DISJOINT: EvalGroups
EVAL_GROUPS_ALL: EvalGroups
BUDGET_SPLIT_UNSPECIFIED: BudgetSplit
BUDGET_SPLIT_EPSILON: BudgetSplit
BUDGET_SPLIT_OWNERS: BudgetSplit
EVAL_MECHANISM_UNSPECIFIED: EvalMechanism
EVAL_MECHANISM_LAPLACE: EvalMechanism
EVAL_MECHANISM_RR: EvalMechanism
STUMP_ENCODING_UNSPECIFIED: StumpEncoding
STUMP_ENCODING_SIGNS: StumpEncoding
STUMP_ENCODING_CELLS: StumpEncoding
STUMP_ENCODING_PAIR: StumpEncoding
STUMP_ENCODING_TABLE: StumpEncoding
FREQUENCY_ORACLE_UNSPECIFIED: FrequencyOracle
FREQUENCY_ORACLE_KRR: FrequencyOracle
FREQUENCY_ORACLE_OUE: FrequencyOracle
FREQUENCY_ORACLE_OLH: FrequencyOracle
REFUSAL_CODE_UNSPECIFIED: RefusalCode
REFUSAL_CODE_BUDGET_EXCEEDED: RefusalCode
REFUSAL_CODE_INVALID_TASK: RefusalCode
REFUSAL_CODE_DUPLICATE_TASK: RefusalCode
REFUSAL_CODE_ALREADY_RELEASED: RefusalCode
REFUSAL_CODE_POLICY: RefusalCode
REFUSAL_CODE_INTERNAL: RefusalCode
REFUSAL_CODE_SCHEMA_MISMATCH: RefusalCode
REFUSAL_CODE_UNOPENED: RefusalCode

class Matrix(_message.Message):
    __slots__ = ("shape", "data")
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    shape: _containers.RepeatedScalarFieldContainer[int]
    data: bytes
    def __init__(self, shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ...) -> None: ...

class Reports(_message.Message):
    __slots__ = ("shape", "grid_bits", "data")
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    GRID_BITS_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    shape: _containers.RepeatedScalarFieldContainer[int]
    grid_bits: int
    data: bytes
    def __init__(self, shape: _Optional[_Iterable[int]] = ..., grid_bits: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class OwnerInfo(_message.Message):
    __slots__ = ("owner_id", "x25519_public_key", "key_signature")
    OWNER_ID_FIELD_NUMBER: _ClassVar[int]
    X25519_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    KEY_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    owner_id: str
    x25519_public_key: bytes
    key_signature: bytes
    def __init__(self, owner_id: _Optional[str] = ..., x25519_public_key: _Optional[bytes] = ..., key_signature: _Optional[bytes] = ...) -> None: ...

class RegisterNodeRequest(_message.Message):
    __slots__ = ("node_id", "owners", "node_certificate", "part", "parts", "key_tree_signature")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    NODE_CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    KEY_TREE_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    owners: _containers.RepeatedCompositeFieldContainer[OwnerInfo]
    node_certificate: bytes
    part: int
    parts: int
    key_tree_signature: bytes
    def __init__(self, node_id: _Optional[str] = ..., owners: _Optional[_Iterable[_Union[OwnerInfo, _Mapping]]] = ..., node_certificate: _Optional[bytes] = ..., part: _Optional[int] = ..., parts: _Optional[int] = ..., key_tree_signature: _Optional[bytes] = ...) -> None: ...

class RegisterNodeResponse(_message.Message):
    __slots__ = ("session_id", "schema")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    schema: str
    def __init__(self, session_id: _Optional[str] = ..., schema: _Optional[str] = ...) -> None: ...

class PullTasksRequest(_message.Message):
    __slots__ = ("node_id", "wait_ms")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    wait_ms: int
    def __init__(self, node_id: _Optional[str] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class PullTasksResponse(_message.Message):
    __slots__ = ("tasks", "shutdown", "job", "job_failed", "ended")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    JOB_FAILED_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    shutdown: bool
    job: JobInfo
    job_failed: bool
    ended: _containers.RepeatedCompositeFieldContainer[JobEnded]
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ..., shutdown: _Optional[bool] = ..., job: _Optional[_Union[JobInfo, _Mapping]] = ..., job_failed: _Optional[bool] = ..., ended: _Optional[_Iterable[_Union[JobEnded, _Mapping]]] = ...) -> None: ...

class JobEnded(_message.Message):
    __slots__ = ("job_id", "failed")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    failed: bool
    def __init__(self, job_id: _Optional[str] = ..., failed: _Optional[bool] = ...) -> None: ...

class JobInfo(_message.Message):
    __slots__ = ("job_id", "data_user", "task", "epsilon", "delta", "schema_sha256")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_USER_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_SHA256_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    data_user: str
    task: str
    epsilon: float
    delta: float
    schema_sha256: str
    def __init__(self, job_id: _Optional[str] = ..., data_user: _Optional[str] = ..., task: _Optional[str] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., schema_sha256: _Optional[str] = ...) -> None: ...

class MechanismSpec(_message.Message):
    __slots__ = ("name", "epsilon")
    NAME_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    name: Mechanism
    epsilon: float
    def __init__(self, name: _Optional[_Union[Mechanism, str]] = ..., epsilon: _Optional[float] = ...) -> None: ...

class NccShareTask(_message.Message):
    __slots__ = ("mechanism", "labels", "label_epsilon", "n_classes", "bounds", "max_owner_rows")
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    LABEL_EPSILON_FIELD_NUMBER: _ClassVar[int]
    N_CLASSES_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    MAX_OWNER_ROWS_FIELD_NUMBER: _ClassVar[int]
    mechanism: MechanismSpec
    labels: LabelScheme
    label_epsilon: float
    n_classes: int
    bounds: Matrix
    max_owner_rows: int
    def __init__(self, mechanism: _Optional[_Union[MechanismSpec, _Mapping]] = ..., labels: _Optional[_Union[LabelScheme, str]] = ..., label_epsilon: _Optional[float] = ..., n_classes: _Optional[int] = ..., bounds: _Optional[_Union[Matrix, _Mapping]] = ..., max_owner_rows: _Optional[int] = ...) -> None: ...

class LrShareTask(_message.Message):
    __slots__ = ("mechanism", "param_bound", "c", "n_classes", "bounds")
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    PARAM_BOUND_FIELD_NUMBER: _ClassVar[int]
    C_FIELD_NUMBER: _ClassVar[int]
    N_CLASSES_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    mechanism: MechanismSpec
    param_bound: float
    c: float
    n_classes: int
    bounds: Matrix
    def __init__(self, mechanism: _Optional[_Union[MechanismSpec, _Mapping]] = ..., param_bound: _Optional[float] = ..., c: _Optional[float] = ..., n_classes: _Optional[int] = ..., bounds: _Optional[_Union[Matrix, _Mapping]] = ...) -> None: ...

class LrGradientTask(_message.Message):
    __slots__ = ("mechanism", "epsilon", "theta", "param_bound", "n_classes", "bounds")
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    THETA_FIELD_NUMBER: _ClassVar[int]
    PARAM_BOUND_FIELD_NUMBER: _ClassVar[int]
    N_CLASSES_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    mechanism: GradientMechanism
    epsilon: float
    theta: Matrix
    param_bound: float
    n_classes: int
    bounds: Matrix
    def __init__(self, mechanism: _Optional[_Union[GradientMechanism, str]] = ..., epsilon: _Optional[float] = ..., theta: _Optional[_Union[Matrix, _Mapping]] = ..., param_bound: _Optional[float] = ..., n_classes: _Optional[int] = ..., bounds: _Optional[_Union[Matrix, _Mapping]] = ...) -> None: ...

class NbReportTask(_message.Message):
    __slots__ = ("epsilon", "n_bins", "n_classes", "bounds")
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    N_BINS_FIELD_NUMBER: _ClassVar[int]
    N_CLASSES_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    epsilon: float
    n_bins: int
    n_classes: int
    bounds: Matrix
    def __init__(self, epsilon: _Optional[float] = ..., n_bins: _Optional[int] = ..., n_classes: _Optional[int] = ..., bounds: _Optional[_Union[Matrix, _Mapping]] = ...) -> None: ...

class PcaShareTask(_message.Message):
    __slots__ = ("epsilon", "delta", "k", "bounds", "count_epsilon", "scaling")
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    COUNT_EPSILON_FIELD_NUMBER: _ClassVar[int]
    SCALING_FIELD_NUMBER: _ClassVar[int]
    epsilon: float
    delta: float
    k: int
    bounds: Matrix
    count_epsilon: float
    scaling: RowScaling
    def __init__(self, epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., k: _Optional[int] = ..., bounds: _Optional[_Union[Matrix, _Mapping]] = ..., count_epsilon: _Optional[float] = ..., scaling: _Optional[_Union[RowScaling, str]] = ...) -> None: ...

class SvmShareTask(_message.Message):
    __slots__ = ("epsilon", "lam", "n_classes", "bounds", "subspace", "delta", "model", "scaling", "rows")
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    LAM_FIELD_NUMBER: _ClassVar[int]
    N_CLASSES_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    SUBSPACE_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SCALING_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    epsilon: float
    lam: float
    n_classes: int
    bounds: Matrix
    subspace: Matrix
    delta: float
    model: SvmModel
    scaling: RowScaling
    rows: int
    def __init__(self, epsilon: _Optional[float] = ..., lam: _Optional[float] = ..., n_classes: _Optional[int] = ..., bounds: _Optional[_Union[Matrix, _Mapping]] = ..., subspace: _Optional[_Union[Matrix, _Mapping]] = ..., delta: _Optional[float] = ..., model: _Optional[_Union[SvmModel, str]] = ..., scaling: _Optional[_Union[RowScaling, str]] = ..., rows: _Optional[int] = ...) -> None: ...

class BoostConfig(_message.Message):
    __slots__ = ("run_id", "base", "epsilon", "mechanism", "n_classes", "n_rounds", "group_size", "n_bins", "weight_bound", "labels", "label_fraction", "c", "param_bound", "eval_fraction", "eval_groups", "eval_row_bound", "max_owner_rows", "bounds", "stump_encoding", "oracle", "n_sampled", "share_groups", "eval_mechanism", "budget_split")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    BASE_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    N_CLASSES_FIELD_NUMBER: _ClassVar[int]
    N_ROUNDS_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    N_BINS_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_BOUND_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    LABEL_FRACTION_FIELD_NUMBER: _ClassVar[int]
    C_FIELD_NUMBER: _ClassVar[int]
    PARAM_BOUND_FIELD_NUMBER: _ClassVar[int]
    EVAL_FRACTION_FIELD_NUMBER: _ClassVar[int]
    EVAL_GROUPS_FIELD_NUMBER: _ClassVar[int]
    EVAL_ROW_BOUND_FIELD_NUMBER: _ClassVar[int]
    MAX_OWNER_ROWS_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    STUMP_ENCODING_FIELD_NUMBER: _ClassVar[int]
    ORACLE_FIELD_NUMBER: _ClassVar[int]
    N_SAMPLED_FIELD_NUMBER: _ClassVar[int]
    SHARE_GROUPS_FIELD_NUMBER: _ClassVar[int]
    EVAL_MECHANISM_FIELD_NUMBER: _ClassVar[int]
    BUDGET_SPLIT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    base: BaseLearner
    epsilon: float
    mechanism: Mechanism
    n_classes: int
    n_rounds: int
    group_size: int
    n_bins: int
    weight_bound: float
    labels: LabelScheme
    label_fraction: float
    c: float
    param_bound: float
    eval_fraction: float
    eval_groups: EvalGroups
    eval_row_bound: float
    max_owner_rows: int
    bounds: Matrix
    stump_encoding: StumpEncoding
    oracle: FrequencyOracle
    n_sampled: int
    share_groups: ShareGroups
    eval_mechanism: EvalMechanism
    budget_split: BudgetSplit
    def __init__(self, run_id: _Optional[str] = ..., base: _Optional[_Union[BaseLearner, str]] = ..., epsilon: _Optional[float] = ..., mechanism: _Optional[_Union[Mechanism, str]] = ..., n_classes: _Optional[int] = ..., n_rounds: _Optional[int] = ..., group_size: _Optional[int] = ..., n_bins: _Optional[int] = ..., weight_bound: _Optional[float] = ..., labels: _Optional[_Union[LabelScheme, str]] = ..., label_fraction: _Optional[float] = ..., c: _Optional[float] = ..., param_bound: _Optional[float] = ..., eval_fraction: _Optional[float] = ..., eval_groups: _Optional[_Union[EvalGroups, str]] = ..., eval_row_bound: _Optional[float] = ..., max_owner_rows: _Optional[int] = ..., bounds: _Optional[_Union[Matrix, _Mapping]] = ..., stump_encoding: _Optional[_Union[StumpEncoding, str]] = ..., oracle: _Optional[_Union[FrequencyOracle, str]] = ..., n_sampled: _Optional[int] = ..., share_groups: _Optional[_Union[ShareGroups, str]] = ..., eval_mechanism: _Optional[_Union[EvalMechanism, str]] = ..., budget_split: _Optional[_Union[BudgetSplit, str]] = ...) -> None: ...

class Stump(_message.Message):
    __slots__ = ("attribute", "threshold_index", "threshold", "leaves", "error")
    ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_INDEX_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    LEAVES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    attribute: int
    threshold_index: int
    threshold: float
    leaves: _containers.RepeatedScalarFieldContainer[int]
    error: float
    def __init__(self, attribute: _Optional[int] = ..., threshold_index: _Optional[int] = ..., threshold: _Optional[float] = ..., leaves: _Optional[_Iterable[int]] = ..., error: _Optional[float] = ...) -> None: ...

class NearestCentroid(_message.Message):
    __slots__ = ("centroids", "classes")
    CENTROIDS_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    centroids: Matrix
    classes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, centroids: _Optional[_Union[Matrix, _Mapping]] = ..., classes: _Optional[_Iterable[int]] = ...) -> None: ...

class LinearModel(_message.Message):
    __slots__ = ("coef", "intercept", "bounds", "classes")
    COEF_FIELD_NUMBER: _ClassVar[int]
    INTERCEPT_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    coef: Matrix
    intercept: _containers.RepeatedScalarFieldContainer[float]
    bounds: Matrix
    classes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, coef: _Optional[_Union[Matrix, _Mapping]] = ..., intercept: _Optional[_Iterable[float]] = ..., bounds: _Optional[_Union[Matrix, _Mapping]] = ..., classes: _Optional[_Iterable[int]] = ...) -> None: ...

class BoostLearner(_message.Message):
    __slots__ = ("stump", "nearest_centroid", "linear")
    STUMP_FIELD_NUMBER: _ClassVar[int]
    NEAREST_CENTROID_FIELD_NUMBER: _ClassVar[int]
    LINEAR_FIELD_NUMBER: _ClassVar[int]
    stump: Stump
    nearest_centroid: NearestCentroid
    linear: LinearModel
    def __init__(self, stump: _Optional[_Union[Stump, _Mapping]] = ..., nearest_centroid: _Optional[_Union[NearestCentroid, _Mapping]] = ..., linear: _Optional[_Union[LinearModel, _Mapping]] = ...) -> None: ...

class KeptRound(_message.Message):
    __slots__ = ("learner", "alpha", "err_total", "weight_total")
    LEARNER_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    ERR_TOTAL_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_TOTAL_FIELD_NUMBER: _ClassVar[int]
    learner: BoostLearner
    alpha: float
    err_total: float
    weight_total: float
    def __init__(self, learner: _Optional[_Union[BoostLearner, _Mapping]] = ..., alpha: _Optional[float] = ..., err_total: _Optional[float] = ..., weight_total: _Optional[float] = ...) -> None: ...

class BoostHistory(_message.Message):
    __slots__ = ("kept", "round")
    KEPT_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    kept: _containers.RepeatedCompositeFieldContainer[KeptRound]
    round: int
    def __init__(self, kept: _Optional[_Iterable[_Union[KeptRound, _Mapping]]] = ..., round: _Optional[int] = ...) -> None: ...

class BoostShareTask(_message.Message):
    __slots__ = ("config", "history")
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    config: BoostConfig
    history: BoostHistory
    def __init__(self, config: _Optional[_Union[BoostConfig, _Mapping]] = ..., history: _Optional[_Union[BoostHistory, _Mapping]] = ...) -> None: ...

class PeerKey(_message.Message):
    __slots__ = ("owner_id", "node_id", "x25519_public_key", "key_signature", "key_index", "key_tree_size", "key_path")
    OWNER_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    X25519_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    KEY_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    KEY_INDEX_FIELD_NUMBER: _ClassVar[int]
    KEY_TREE_SIZE_FIELD_NUMBER: _ClassVar[int]
    KEY_PATH_FIELD_NUMBER: _ClassVar[int]
    owner_id: str
    node_id: str
    x25519_public_key: bytes
    key_signature: bytes
    key_index: int
    key_tree_size: int
    key_path: bytes
    def __init__(self, owner_id: _Optional[str] = ..., node_id: _Optional[str] = ..., x25519_public_key: _Optional[bytes] = ..., key_signature: _Optional[bytes] = ..., key_index: _Optional[int] = ..., key_tree_size: _Optional[int] = ..., key_path: _Optional[bytes] = ...) -> None: ...

class NodeCertificate(_message.Message):
    __slots__ = ("node_id", "pem")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PEM_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    pem: bytes
    def __init__(self, node_id: _Optional[str] = ..., pem: _Optional[bytes] = ...) -> None: ...

class RingSpec(_message.Message):
    __slots__ = ("session_id", "ring", "frac_bits", "n_parties", "max_abs", "peers", "certificates")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    RING_FIELD_NUMBER: _ClassVar[int]
    FRAC_BITS_FIELD_NUMBER: _ClassVar[int]
    N_PARTIES_FIELD_NUMBER: _ClassVar[int]
    MAX_ABS_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATES_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    ring: _containers.RepeatedScalarFieldContainer[str]
    frac_bits: int
    n_parties: int
    max_abs: float
    peers: _containers.RepeatedCompositeFieldContainer[PeerKey]
    certificates: _containers.RepeatedCompositeFieldContainer[NodeCertificate]
    def __init__(self, session_id: _Optional[str] = ..., ring: _Optional[_Iterable[str]] = ..., frac_bits: _Optional[int] = ..., n_parties: _Optional[int] = ..., max_abs: _Optional[float] = ..., peers: _Optional[_Iterable[_Union[PeerKey, _Mapping]]] = ..., certificates: _Optional[_Iterable[_Union[NodeCertificate, _Mapping]]] = ...) -> None: ...

class BoostEvaluateTask(_message.Message):
    __slots__ = ("ring", "config", "history", "learner", "secagg")
    RING_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    LEARNER_FIELD_NUMBER: _ClassVar[int]
    SECAGG_FIELD_NUMBER: _ClassVar[int]
    ring: RingSpec
    config: BoostConfig
    history: BoostHistory
    learner: BoostLearner
    secagg: SecAggInput
    def __init__(self, ring: _Optional[_Union[RingSpec, _Mapping]] = ..., config: _Optional[_Union[BoostConfig, _Mapping]] = ..., history: _Optional[_Union[BoostHistory, _Mapping]] = ..., learner: _Optional[_Union[BoostLearner, _Mapping]] = ..., secagg: _Optional[_Union[SecAggInput, _Mapping]] = ...) -> None: ...

class KeyAdvert(_message.Message):
    __slots__ = ("owner_id", "public_key", "signature")
    OWNER_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    owner_id: str
    public_key: bytes
    signature: bytes
    def __init__(self, owner_id: _Optional[str] = ..., public_key: _Optional[bytes] = ..., signature: _Optional[bytes] = ...) -> None: ...

class SealedShare(_message.Message):
    __slots__ = ("sender", "recipient", "ciphertext")
    SENDER_FIELD_NUMBER: _ClassVar[int]
    RECIPIENT_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXT_FIELD_NUMBER: _ClassVar[int]
    sender: str
    recipient: str
    ciphertext: bytes
    def __init__(self, sender: _Optional[str] = ..., recipient: _Optional[str] = ..., ciphertext: _Optional[bytes] = ...) -> None: ...

class ShareKeysRequest(_message.Message):
    __slots__ = ("members", "adverts", "rounds")
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    ADVERTS_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedScalarFieldContainer[str]
    adverts: _containers.RepeatedCompositeFieldContainer[KeyAdvert]
    rounds: int
    def __init__(self, members: _Optional[_Iterable[str]] = ..., adverts: _Optional[_Iterable[_Union[KeyAdvert, _Mapping]]] = ..., rounds: _Optional[int] = ...) -> None: ...

class SecAggKeysTask(_message.Message):
    __slots__ = ("session_id", "frac_bits", "n_parties", "max_abs", "share_keys", "peers", "certificates")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    FRAC_BITS_FIELD_NUMBER: _ClassVar[int]
    N_PARTIES_FIELD_NUMBER: _ClassVar[int]
    MAX_ABS_FIELD_NUMBER: _ClassVar[int]
    SHARE_KEYS_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATES_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    frac_bits: int
    n_parties: int
    max_abs: float
    share_keys: ShareKeysRequest
    peers: _containers.RepeatedCompositeFieldContainer[PeerKey]
    certificates: _containers.RepeatedCompositeFieldContainer[NodeCertificate]
    def __init__(self, session_id: _Optional[str] = ..., frac_bits: _Optional[int] = ..., n_parties: _Optional[int] = ..., max_abs: _Optional[float] = ..., share_keys: _Optional[_Union[ShareKeysRequest, _Mapping]] = ..., peers: _Optional[_Iterable[_Union[PeerKey, _Mapping]]] = ..., certificates: _Optional[_Iterable[_Union[NodeCertificate, _Mapping]]] = ...) -> None: ...

class SecAggInput(_message.Message):
    __slots__ = ("round", "participants", "key_shares")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    PARTICIPANTS_FIELD_NUMBER: _ClassVar[int]
    KEY_SHARES_FIELD_NUMBER: _ClassVar[int]
    round: int
    participants: _containers.RepeatedScalarFieldContainer[str]
    key_shares: _containers.RepeatedCompositeFieldContainer[SealedShare]
    def __init__(self, round: _Optional[int] = ..., participants: _Optional[_Iterable[str]] = ..., key_shares: _Optional[_Iterable[_Union[SealedShare, _Mapping]]] = ...) -> None: ...

class SecAggUnmaskTask(_message.Message):
    __slots__ = ("session_id", "round", "survivors", "dropped")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    SURVIVORS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    round: int
    survivors: _containers.RepeatedScalarFieldContainer[str]
    dropped: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, session_id: _Optional[str] = ..., round: _Optional[int] = ..., survivors: _Optional[_Iterable[str]] = ..., dropped: _Optional[_Iterable[str]] = ...) -> None: ...

class KeyShares(_message.Message):
    __slots__ = ("shares",)
    SHARES_FIELD_NUMBER: _ClassVar[int]
    shares: _containers.RepeatedCompositeFieldContainer[SealedShare]
    def __init__(self, shares: _Optional[_Iterable[_Union[SealedShare, _Mapping]]] = ...) -> None: ...

class MaskedInput(_message.Message):
    __slots__ = ("round", "masked")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    MASKED_FIELD_NUMBER: _ClassVar[int]
    round: int
    masked: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, round: _Optional[int] = ..., masked: _Optional[_Iterable[int]] = ...) -> None: ...

class OwnerShare(_message.Message):
    __slots__ = ("owner_id", "share")
    OWNER_ID_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    owner_id: str
    share: bytes
    def __init__(self, owner_id: _Optional[str] = ..., share: _Optional[bytes] = ...) -> None: ...

class UnmaskReply(_message.Message):
    __slots__ = ("round", "self_shares", "key_shares")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    SELF_SHARES_FIELD_NUMBER: _ClassVar[int]
    KEY_SHARES_FIELD_NUMBER: _ClassVar[int]
    round: int
    self_shares: _containers.RepeatedCompositeFieldContainer[OwnerShare]
    key_shares: _containers.RepeatedCompositeFieldContainer[OwnerShare]
    def __init__(self, round: _Optional[int] = ..., self_shares: _Optional[_Iterable[_Union[OwnerShare, _Mapping]]] = ..., key_shares: _Optional[_Iterable[_Union[OwnerShare, _Mapping]]] = ...) -> None: ...

class RingMessageTask(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class JoinTask(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class JoinAccepted(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Task(_message.Message):
    __slots__ = ("task_id", "owner_id", "round_id", "ncc_share", "lr_share", "pca_share", "svm_share", "boost_share", "boost_evaluate", "ring_message", "secagg_keys", "secagg_unmask", "lr_gradient", "nb", "join")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    NCC_SHARE_FIELD_NUMBER: _ClassVar[int]
    LR_SHARE_FIELD_NUMBER: _ClassVar[int]
    PCA_SHARE_FIELD_NUMBER: _ClassVar[int]
    SVM_SHARE_FIELD_NUMBER: _ClassVar[int]
    BOOST_SHARE_FIELD_NUMBER: _ClassVar[int]
    BOOST_EVALUATE_FIELD_NUMBER: _ClassVar[int]
    RING_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SECAGG_KEYS_FIELD_NUMBER: _ClassVar[int]
    SECAGG_UNMASK_FIELD_NUMBER: _ClassVar[int]
    LR_GRADIENT_FIELD_NUMBER: _ClassVar[int]
    NB_FIELD_NUMBER: _ClassVar[int]
    JOIN_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    owner_id: str
    round_id: str
    ncc_share: NccShareTask
    lr_share: LrShareTask
    pca_share: PcaShareTask
    svm_share: SvmShareTask
    boost_share: BoostShareTask
    boost_evaluate: BoostEvaluateTask
    ring_message: RingMessageTask
    secagg_keys: SecAggKeysTask
    secagg_unmask: SecAggUnmaskTask
    lr_gradient: LrGradientTask
    nb: NbReportTask
    join: JoinTask
    def __init__(self, task_id: _Optional[str] = ..., owner_id: _Optional[str] = ..., round_id: _Optional[str] = ..., ncc_share: _Optional[_Union[NccShareTask, _Mapping]] = ..., lr_share: _Optional[_Union[LrShareTask, _Mapping]] = ..., pca_share: _Optional[_Union[PcaShareTask, _Mapping]] = ..., svm_share: _Optional[_Union[SvmShareTask, _Mapping]] = ..., boost_share: _Optional[_Union[BoostShareTask, _Mapping]] = ..., boost_evaluate: _Optional[_Union[BoostEvaluateTask, _Mapping]] = ..., ring_message: _Optional[_Union[RingMessageTask, _Mapping]] = ..., secagg_keys: _Optional[_Union[SecAggKeysTask, _Mapping]] = ..., secagg_unmask: _Optional[_Union[SecAggUnmaskTask, _Mapping]] = ..., lr_gradient: _Optional[_Union[LrGradientTask, _Mapping]] = ..., nb: _Optional[_Union[NbReportTask, _Mapping]] = ..., join: _Optional[_Union[JoinTask, _Mapping]] = ...) -> None: ...

class Refusal(_message.Message):
    __slots__ = ("code", "message", "accused")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACCUSED_FIELD_NUMBER: _ClassVar[int]
    code: RefusalCode
    message: str
    accused: str
    def __init__(self, code: _Optional[_Union[RefusalCode, str]] = ..., message: _Optional[str] = ..., accused: _Optional[str] = ...) -> None: ...

class NccShare(_message.Message):
    __slots__ = ("reports", "labels", "joint")
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    JOINT_FIELD_NUMBER: _ClassVar[int]
    reports: Reports
    labels: _containers.RepeatedScalarFieldContainer[int]
    joint: JointNccReports
    def __init__(self, reports: _Optional[_Union[Reports, _Mapping]] = ..., labels: _Optional[_Iterable[int]] = ..., joint: _Optional[_Union[JointNccReports, _Mapping]] = ...) -> None: ...

class LrShare(_message.Message):
    __slots__ = ("reports",)
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    reports: Reports
    def __init__(self, reports: _Optional[_Union[Reports, _Mapping]] = ...) -> None: ...

class LrGradient(_message.Message):
    __slots__ = ("reports",)
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    reports: Reports
    def __init__(self, reports: _Optional[_Union[Reports, _Mapping]] = ...) -> None: ...

class NbReport(_message.Message):
    __slots__ = ("feature", "report")
    FEATURE_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    feature: int
    report: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, feature: _Optional[int] = ..., report: _Optional[_Iterable[int]] = ...) -> None: ...

class PcaShare(_message.Message):
    __slots__ = ("subspace", "noisy_count")
    SUBSPACE_FIELD_NUMBER: _ClassVar[int]
    NOISY_COUNT_FIELD_NUMBER: _ClassVar[int]
    subspace: Matrix
    noisy_count: int
    def __init__(self, subspace: _Optional[_Union[Matrix, _Mapping]] = ..., noisy_count: _Optional[int] = ...) -> None: ...

class SvmShare(_message.Message):
    __slots__ = ("coef",)
    COEF_FIELD_NUMBER: _ClassVar[int]
    coef: Matrix
    def __init__(self, coef: _Optional[_Union[Matrix, _Mapping]] = ...) -> None: ...

class StumpShare(_message.Message):
    __slots__ = ("reports",)
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    reports: Reports
    def __init__(self, reports: _Optional[_Union[Reports, _Mapping]] = ...) -> None: ...

class SampledStumpShare(_message.Message):
    __slots__ = ("coordinates", "reports")
    COORDINATES_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    coordinates: _containers.RepeatedScalarFieldContainer[int]
    reports: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, coordinates: _Optional[_Iterable[int]] = ..., reports: _Optional[_Iterable[int]] = ...) -> None: ...

class LrParameters(_message.Message):
    __slots__ = ("reports",)
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    reports: Reports
    def __init__(self, reports: _Optional[_Union[Reports, _Mapping]] = ...) -> None: ...

class NccRows(_message.Message):
    __slots__ = ("reports", "labels")
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    reports: Reports
    labels: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, reports: _Optional[_Union[Reports, _Mapping]] = ..., labels: _Optional[_Iterable[int]] = ...) -> None: ...

class JointNccReports(_message.Message):
    __slots__ = ("features", "reports")
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    features: _containers.RepeatedScalarFieldContainer[int]
    reports: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, features: _Optional[_Iterable[int]] = ..., reports: _Optional[_Iterable[int]] = ...) -> None: ...

class BoostShare(_message.Message):
    __slots__ = ("stump", "sampled_stump", "lr", "ncc", "joint_ncc")
    STUMP_FIELD_NUMBER: _ClassVar[int]
    SAMPLED_STUMP_FIELD_NUMBER: _ClassVar[int]
    LR_FIELD_NUMBER: _ClassVar[int]
    NCC_FIELD_NUMBER: _ClassVar[int]
    JOINT_NCC_FIELD_NUMBER: _ClassVar[int]
    stump: StumpShare
    sampled_stump: SampledStumpShare
    lr: LrParameters
    ncc: NccRows
    joint_ncc: JointNccReports
    def __init__(self, stump: _Optional[_Union[StumpShare, _Mapping]] = ..., sampled_stump: _Optional[_Union[SampledStumpShare, _Mapping]] = ..., lr: _Optional[_Union[LrParameters, _Mapping]] = ..., ncc: _Optional[_Union[NccRows, _Mapping]] = ..., joint_ncc: _Optional[_Union[JointNccReports, _Mapping]] = ...) -> None: ...

class RingJoined(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class RingTotal(_message.Message):
    __slots__ = ("session_id", "values")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, session_id: _Optional[str] = ..., values: _Optional[_Iterable[float]] = ...) -> None: ...

class Result(_message.Message):
    __slots__ = ("task_id", "owner_id", "refusal", "ncc_share", "lr_share", "pca_share", "svm_share", "boost_share", "ring_joined", "ring_total", "key_advert", "key_shares", "masked_input", "unmask_reply", "lr_gradient", "nb", "join_accepted")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_ID_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    NCC_SHARE_FIELD_NUMBER: _ClassVar[int]
    LR_SHARE_FIELD_NUMBER: _ClassVar[int]
    PCA_SHARE_FIELD_NUMBER: _ClassVar[int]
    SVM_SHARE_FIELD_NUMBER: _ClassVar[int]
    BOOST_SHARE_FIELD_NUMBER: _ClassVar[int]
    RING_JOINED_FIELD_NUMBER: _ClassVar[int]
    RING_TOTAL_FIELD_NUMBER: _ClassVar[int]
    KEY_ADVERT_FIELD_NUMBER: _ClassVar[int]
    KEY_SHARES_FIELD_NUMBER: _ClassVar[int]
    MASKED_INPUT_FIELD_NUMBER: _ClassVar[int]
    UNMASK_REPLY_FIELD_NUMBER: _ClassVar[int]
    LR_GRADIENT_FIELD_NUMBER: _ClassVar[int]
    NB_FIELD_NUMBER: _ClassVar[int]
    JOIN_ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    owner_id: str
    refusal: Refusal
    ncc_share: NccShare
    lr_share: LrShare
    pca_share: PcaShare
    svm_share: SvmShare
    boost_share: BoostShare
    ring_joined: RingJoined
    ring_total: RingTotal
    key_advert: KeyAdvert
    key_shares: KeyShares
    masked_input: MaskedInput
    unmask_reply: UnmaskReply
    lr_gradient: LrGradient
    nb: NbReport
    join_accepted: JoinAccepted
    def __init__(self, task_id: _Optional[str] = ..., owner_id: _Optional[str] = ..., refusal: _Optional[_Union[Refusal, _Mapping]] = ..., ncc_share: _Optional[_Union[NccShare, _Mapping]] = ..., lr_share: _Optional[_Union[LrShare, _Mapping]] = ..., pca_share: _Optional[_Union[PcaShare, _Mapping]] = ..., svm_share: _Optional[_Union[SvmShare, _Mapping]] = ..., boost_share: _Optional[_Union[BoostShare, _Mapping]] = ..., ring_joined: _Optional[_Union[RingJoined, _Mapping]] = ..., ring_total: _Optional[_Union[RingTotal, _Mapping]] = ..., key_advert: _Optional[_Union[KeyAdvert, _Mapping]] = ..., key_shares: _Optional[_Union[KeyShares, _Mapping]] = ..., masked_input: _Optional[_Union[MaskedInput, _Mapping]] = ..., unmask_reply: _Optional[_Union[UnmaskReply, _Mapping]] = ..., lr_gradient: _Optional[_Union[LrGradient, _Mapping]] = ..., nb: _Optional[_Union[NbReport, _Mapping]] = ..., join_accepted: _Optional[_Union[JoinAccepted, _Mapping]] = ...) -> None: ...

class PushResultsRequest(_message.Message):
    __slots__ = ("node_id", "results", "pull", "wait_ms", "leaving", "schema_mismatch", "hear_ended")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    PULL_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    LEAVING_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_MISMATCH_FIELD_NUMBER: _ClassVar[int]
    HEAR_ENDED_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    results: _containers.RepeatedCompositeFieldContainer[Result]
    pull: bool
    wait_ms: int
    leaving: bool
    schema_mismatch: bool
    hear_ended: bool
    def __init__(self, node_id: _Optional[str] = ..., results: _Optional[_Iterable[_Union[Result, _Mapping]]] = ..., pull: _Optional[bool] = ..., wait_ms: _Optional[int] = ..., leaving: _Optional[bool] = ..., schema_mismatch: _Optional[bool] = ..., hear_ended: _Optional[bool] = ...) -> None: ...

class PushResultsResponse(_message.Message):
    __slots__ = ("accepted", "tasks", "shutdown", "job", "job_failed", "ended")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    JOB_FAILED_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    shutdown: bool
    job: JobInfo
    job_failed: bool
    ended: _containers.RepeatedCompositeFieldContainer[JobEnded]
    def __init__(self, accepted: _Optional[int] = ..., tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ..., shutdown: _Optional[bool] = ..., job: _Optional[_Union[JobInfo, _Mapping]] = ..., job_failed: _Optional[bool] = ..., ended: _Optional[_Iterable[_Union[JobEnded, _Mapping]]] = ...) -> None: ...

class PredictRequest(_message.Message):
    __slots__ = ("model_id", "rows", "probabilities")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    rows: Reports
    probabilities: bool
    def __init__(self, model_id: _Optional[str] = ..., rows: _Optional[_Union[Reports, _Mapping]] = ..., probabilities: _Optional[bool] = ...) -> None: ...

class PredictResponse(_message.Message):
    __slots__ = ("labels", "label_values", "probabilities")
    LABELS_FIELD_NUMBER: _ClassVar[int]
    LABEL_VALUES_FIELD_NUMBER: _ClassVar[int]
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    labels: _containers.RepeatedScalarFieldContainer[int]
    label_values: _containers.RepeatedScalarFieldContainer[str]
    probabilities: Matrix
    def __init__(self, labels: _Optional[_Iterable[int]] = ..., label_values: _Optional[_Iterable[str]] = ..., probabilities: _Optional[_Union[Matrix, _Mapping]] = ...) -> None: ...

class GetModelRequest(_message.Message):
    __slots__ = ("model_id",)
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    def __init__(self, model_id: _Optional[str] = ...) -> None: ...

class GetModelResponse(_message.Message):
    __slots__ = ("model_id", "kind", "bounds", "linear_stage", "classes", "probabilities", "schema")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    LINEAR_STAGE_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    kind: str
    bounds: Matrix
    linear_stage: Matrix
    classes: _containers.RepeatedScalarFieldContainer[str]
    probabilities: bool
    schema: str
    def __init__(self, model_id: _Optional[str] = ..., kind: _Optional[str] = ..., bounds: _Optional[_Union[Matrix, _Mapping]] = ..., linear_stage: _Optional[_Union[Matrix, _Mapping]] = ..., classes: _Optional[_Iterable[str]] = ..., probabilities: _Optional[bool] = ..., schema: _Optional[str] = ...) -> None: ...

class Envelope(_message.Message):
    __slots__ = ("recipient", "data")
    RECIPIENT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    recipient: str
    data: bytes
    def __init__(self, recipient: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class RelayRequest(_message.Message):
    __slots__ = ("node_id", "envelopes")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ENVELOPES_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    envelopes: _containers.RepeatedCompositeFieldContainer[Envelope]
    def __init__(self, node_id: _Optional[str] = ..., envelopes: _Optional[_Iterable[_Union[Envelope, _Mapping]]] = ...) -> None: ...

class RelayResponse(_message.Message):
    __slots__ = ("accepted", "tasks", "job")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    job: JobInfo
    def __init__(self, accepted: _Optional[int] = ..., tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ..., job: _Optional[_Union[JobInfo, _Mapping]] = ...) -> None: ...
