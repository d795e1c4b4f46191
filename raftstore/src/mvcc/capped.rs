//! Applying alarms, and refusing writes while NOSPACE is raised (etcd's
//! capped applier); see [`super::alarm`].

use proto::etcdserverpb::{AlarmRequest, AlarmResponse};

use super::alarm::{alarm_action, alarm_type, encode_alarms, member};
use super::kvstore::header;
use super::txn::Txn;
use crate::error::{Error, Result};
use crate::storage::keys::{self, MetaKey as _};

impl Txn<'_> {
    /// etcd's `Alarm` in apply: GET lists the alarms of a type (all for
    /// NONE); ACTIVATE answers with the alarm (raised now or before; NONE
    /// is never raised); DEACTIVATE with the alarm it cleared, if any.
    pub(super) fn alarm(&mut self, r: &AlarmRequest) -> Result<AlarmResponse> {
        let mut resp = AlarmResponse { header: header(self.begin), alarms: Vec::new() };
        let a = (r.member_id, r.alarm);
        let changed = match r.action {
            alarm_action::GET => {
                resp.alarms = self.st.alarms.iter().filter(|(_, t)| r.alarm == alarm_type::NONE || *t == r.alarm).map(member).collect();
                false
            }
            // An alarm already raised is reported again, as etcd does.
            alarm_action::ACTIVATE if r.alarm != alarm_type::NONE => {
                resp.alarms.push(member(&a));
                self.st.alarms.insert(a)
            }
            alarm_action::DEACTIVATE => {
                let removed = self.st.alarms.remove(&a);
                if removed {
                    resp.alarms.push(member(&a));
                }
                removed
            }
            _ => false,
        };
        if changed {
            let meta = crate::storage::cf(self.db, keys::CF_META)?;
            self.batch.put_cf(meta, keys::Alarms::KEY, encode_alarms(&self.st.alarms));
        }
        Ok(resp)
    }

    /// [`Error::NoSpace`] while a NOSPACE alarm is raised.
    pub(super) fn check_space(&self) -> Result<()> {
        if self.st.alarms.iter().any(|(_, t)| *t == alarm_type::NOSPACE) {
            return Err(Error::NoSpace);
        }
        Ok(())
    }
}
