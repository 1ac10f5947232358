//! The SQS operations, by the name a request gives them (`X-Amz-Target: AmazonSQS.<name>` or
//! `Action=<name>`).

use crate::error::SqsError;

macro_rules! actions {
    ($($name:ident),+ $(,)?) => {
        /// Every operation the SQS API serves (issue 13).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Action {
            $($name),+
        }

        impl Action {
            /// Every action, in the order of the API reference.
            pub const ALL: &'static [Action] = &[$(Action::$name),+];

            /// The operation's name on the wire.
            pub fn name(self) -> &'static str {
                match self {
                    $(Action::$name => stringify!($name)),+
                }
            }

            /// The operation a request names; an unknown name is `InvalidAction` with AWS's
            /// message (names are case-sensitive, as AWS's are).
            pub fn from_name(name: &str) -> Result<Action, SqsError> {
                match name {
                    $(stringify!($name) => Ok(Action::$name),)+
                    other => Err(SqsError::invalid_action(other)),
                }
            }
        }
    };
}

actions! {
    CreateQueue,
    GetQueueUrl,
    ListQueues,
    DeleteQueue,
    GetQueueAttributes,
    SetQueueAttributes,
    PurgeQueue,
    SendMessage,
    SendMessageBatch,
    ReceiveMessage,
    DeleteMessage,
    DeleteMessageBatch,
    ChangeMessageVisibility,
    ChangeMessageVisibilityBatch,
    ListDeadLetterSourceQueues,
    TagQueue,
    UntagQueue,
    ListQueueTags,
    StartMessageMoveTask,
    ListMessageMoveTasks,
    CancelMessageMoveTask,
    AddPermission,
    RemovePermission,
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn every_action_round_trips_its_name() {
        assert_eq!(Action::ALL.len(), 23);
        for action in Action::ALL {
            assert_eq!(Action::from_name(action.name()), Ok(*action));
        }
    }

    #[test]
    fn unknown_names_are_invalid_action() {
        for name in ["FooBar", "sendMessage", ""] {
            let error = Action::from_name(name).expect_err(name);
            assert_eq!(error.kind, ErrorKind::InvalidAction);
            assert_eq!(
                error.message,
                format!("The action {name} is not valid for this endpoint.")
            );
        }
    }
}
