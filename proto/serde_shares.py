"""Serde pairs of the LDP-model and FedDPDR task kinds (``common/tasks/shares.py``, ``gradient.py``,
``naive_bayes.py``, ``feddpdr.py``)."""

from __future__ import annotations

import numpy as np

from privfed.common.errors import RemoteProtocolError
from privfed.common.feddpdr.choices import ROW_SCALINGS, SVM_MODELS
from privfed.common.learners.ldp_gd import GD_MECHANISMS
from privfed.common.learners.ncc import LABEL_SCHEMES
from privfed.common.mechanisms.base import MECHANISMS
from privfed.common.tasks.feddpdr import PcaShareReply, PcaShareTask, SvmShareReply, SvmShareTask
from privfed.common.tasks.gradient import LrGradientReply, LrGradientTask
from privfed.common.tasks.naive_bayes import NbReportReply, NbReportTask
from privfed.common.tasks.shares import JointNccShareReply, LrShareReply, LrShareTask, NccShareReply, NccShareTask
from privfed.proto import privfed_pb2 as pb
from privfed.proto.serde_arrays import (
    WireEnum,
    bounds_from_proto,
    bounds_to_proto,
    integers,
    matrix_from_proto,
    matrix_to_proto,
    reports_from_proto,
    reports_to_proto,
    two_d,
)

MECHANISM = WireEnum(pb.Mechanism, MECHANISMS)
LABEL_SCHEME = WireEnum(pb.LabelScheme, LABEL_SCHEMES)
SVM_MODEL = WireEnum(pb.SvmModel, SVM_MODELS)
ROW_SCALING = WireEnum(pb.RowScaling, ROW_SCALINGS)
GRADIENT_MECHANISM = WireEnum(pb.GradientMechanism, GD_MECHANISMS)


def ncc_task_to_proto(s: NccShareTask) -> pb.NccShareTask:
    return pb.NccShareTask(
        mechanism=pb.MechanismSpec(name=MECHANISM.to_proto(s.mechanism), epsilon=s.epsilon),
        labels=LABEL_SCHEME.to_proto(s.labels),
        label_epsilon=s.label_epsilon,
        n_classes=s.n_classes,
        bounds=bounds_to_proto(s.bounds),
        max_owner_rows=s.max_owner_rows or 0,
    )


def ncc_task_from_proto(k: pb.NccShareTask) -> NccShareTask:
    return NccShareTask(
        mechanism=MECHANISM.from_proto(k.mechanism.name, "mechanism"),
        epsilon=k.mechanism.epsilon,
        labels=LABEL_SCHEME.from_proto(k.labels, "labels"),
        label_epsilon=k.label_epsilon,
        n_classes=int(k.n_classes),
        bounds=bounds_from_proto(k.bounds),
        max_owner_rows=int(k.max_owner_rows) or None,  # 0: no bound
    )


def joint_reports_to_proto(features: np.ndarray, reports: np.ndarray) -> pb.JointNccReports:
    """Joint (label, sign) reports, one sampled feature and one k-RR output per row (``labels="joint"``)."""
    features_, reports_ = (np.asarray(a, dtype=np.int64).reshape(-1).tolist() for a in (features, reports))
    return pb.JointNccReports(features=features_, reports=reports_)


def joint_reports_from_proto(m: pb.JointNccReports, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``(features, reports)`` of :func:`joint_reports_to_proto`, one of each per row."""
    features, reports = integers(m.features, "features"), integers(m.reports, "reports")
    if features.shape != reports.shape:
        raise RemoteProtocolError(f"{what}: {features.size} sampled features for {reports.size} reports")
    return features, reports


def ncc_reply_to_proto(p: NccShareReply | JointNccShareReply) -> pb.NccShare:
    if isinstance(p, JointNccShareReply):
        return pb.NccShare(joint=joint_reports_to_proto(p.features, p.reports))
    return pb.NccShare(reports=reports_to_proto(p.reports), labels=np.asarray(p.labels, dtype=np.int64).tolist())


def ncc_reply_from_proto(m: pb.NccShare, owner_id: str) -> NccShareReply | JointNccShareReply:
    if m.HasField("joint"):
        if m.HasField("reports") or len(m.labels):
            raise RemoteProtocolError("ncc share: joint reports beside perturbed rows or labels")
        return JointNccShareReply(*joint_reports_from_proto(m.joint, "joint ncc share"))
    reports = reports_from_proto(m.reports)
    labels = integers(m.labels, "labels")
    if reports.ndim != 2 or reports.shape[0] != labels.shape[0]:
        raise RemoteProtocolError(f"ncc share: {reports.shape} reports for {labels.shape[0]} labels")
    return NccShareReply(reports=reports, labels=labels)


def lr_task_to_proto(s: LrShareTask) -> pb.LrShareTask:
    return pb.LrShareTask(
        mechanism=pb.MechanismSpec(name=MECHANISM.to_proto(s.mechanism), epsilon=s.epsilon),
        param_bound=s.param_bound,
        c=s.c,
        n_classes=s.n_classes,
        bounds=bounds_to_proto(s.bounds),
    )


def lr_task_from_proto(k: pb.LrShareTask) -> LrShareTask:
    return LrShareTask(
        mechanism=MECHANISM.from_proto(k.mechanism.name, "mechanism"),
        epsilon=k.mechanism.epsilon,
        param_bound=k.param_bound,
        c=k.c,
        n_classes=int(k.n_classes),
        bounds=bounds_from_proto(k.bounds),
    )


def lr_reply_to_proto(p: LrShareReply) -> pb.LrShare:
    return pb.LrShare(reports=reports_to_proto(p.reports))


def lr_reply_from_proto(m: pb.LrShare, owner_id: str) -> LrShareReply:
    return LrShareReply(reports=reports_from_proto(m.reports))


def gradient_task_to_proto(s: LrGradientTask) -> pb.LrGradientTask:
    return pb.LrGradientTask(
        mechanism=GRADIENT_MECHANISM.to_proto(s.mechanism),
        epsilon=s.epsilon,
        theta=matrix_to_proto(s.theta),
        param_bound=s.param_bound,
        n_classes=s.n_classes,
        bounds=bounds_to_proto(s.bounds),
    )


def gradient_task_from_proto(k: pb.LrGradientTask) -> LrGradientTask:
    return LrGradientTask(
        mechanism=GRADIENT_MECHANISM.from_proto(k.mechanism, "mechanism"),
        epsilon=k.epsilon,
        theta=two_d(matrix_from_proto(k.theta), "theta"),
        param_bound=k.param_bound,
        n_classes=int(k.n_classes),
        bounds=bounds_from_proto(k.bounds),
    )


def gradient_reply_to_proto(p: LrGradientReply) -> pb.LrGradient:
    return pb.LrGradient(reports=reports_to_proto(p.reports))


def gradient_reply_from_proto(m: pb.LrGradient, owner_id: str) -> LrGradientReply:
    return LrGradientReply(reports=reports_from_proto(m.reports))


def nb_task_to_proto(s: NbReportTask) -> pb.NbReportTask:
    return pb.NbReportTask(
        epsilon=s.epsilon, n_bins=s.n_bins, n_classes=s.n_classes, bounds=bounds_to_proto(s.bounds)
    )  # fmt: skip


def nb_task_from_proto(k: pb.NbReportTask) -> NbReportTask:
    return NbReportTask(
        epsilon=k.epsilon, n_bins=int(k.n_bins), n_classes=int(k.n_classes), bounds=bounds_from_proto(k.bounds)
    )  # fmt: skip


def nb_reply_to_proto(p: NbReportReply) -> pb.NbReport:
    feature = int(np.asarray(p.features).reshape(-1)[0])
    return pb.NbReport(feature=feature, report=np.asarray(p.reports, dtype=np.int64).reshape(-1).tolist())


def nb_reply_from_proto(m: pb.NbReport, owner_id: str) -> NbReportReply:
    return NbReportReply(
        features=np.array([m.feature], dtype=np.int64), reports=integers(m.report, "report").reshape(1, -1)
    )  # fmt: skip


def pca_task_to_proto(s: PcaShareTask) -> pb.PcaShareTask:
    return pb.PcaShareTask(
        epsilon=s.epsilon,
        delta=s.delta,
        k=s.k,
        bounds=bounds_to_proto(s.bounds),
        count_epsilon=s.count_epsilon,
        scaling=ROW_SCALING.to_proto(s.scaling),
    )


def pca_task_from_proto(k: pb.PcaShareTask) -> PcaShareTask:
    return PcaShareTask(
        epsilon=k.epsilon,
        delta=k.delta,
        k=int(k.k),
        bounds=bounds_from_proto(k.bounds),
        count_epsilon=k.count_epsilon,
        scaling=ROW_SCALING.from_proto(k.scaling, "scaling"),
    )


def pca_reply_to_proto(p: PcaShareReply) -> pb.PcaShare:
    return pb.PcaShare(subspace=matrix_to_proto(p.subspace), noisy_count=p.noisy_count)


def pca_reply_from_proto(m: pb.PcaShare, owner_id: str) -> PcaShareReply:
    return PcaShareReply(subspace=two_d(matrix_from_proto(m.subspace), "subspace"), noisy_count=int(m.noisy_count))


def svm_task_to_proto(s: SvmShareTask) -> pb.SvmShareTask:
    return pb.SvmShareTask(
        epsilon=s.epsilon,
        lam=s.lam,
        n_classes=s.n_classes,
        bounds=bounds_to_proto(s.bounds),
        subspace=matrix_to_proto(np.zeros((0,)) if s.subspace is None else s.subspace),
        delta=s.delta,
        model=SVM_MODEL.to_proto(s.model),
        scaling=ROW_SCALING.to_proto(s.scaling),
        rows=s.rows,
    )


def svm_task_from_proto(k: pb.SvmShareTask) -> SvmShareTask:
    U = matrix_from_proto(k.subspace)
    return SvmShareTask(
        epsilon=k.epsilon,
        lam=k.lam,
        n_classes=int(k.n_classes),
        bounds=bounds_from_proto(k.bounds),
        subspace=U if U.size else None,
        delta=k.delta,
        model=SVM_MODEL.from_proto(k.model, "model"),
        scaling=ROW_SCALING.from_proto(k.scaling, "scaling"),
        rows=int(k.rows),
    )


def svm_reply_to_proto(p: SvmShareReply) -> pb.SvmShare:
    return pb.SvmShare(coef=matrix_to_proto(p.coef))


def svm_reply_from_proto(m: pb.SvmShare, owner_id: str) -> SvmShareReply:
    return SvmShareReply(coef=two_d(matrix_from_proto(m.coef), "coef"))
