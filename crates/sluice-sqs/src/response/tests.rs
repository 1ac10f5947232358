use super::*;
use crate::request::Blob;

const NS: &str = "xmlns=\"http://queue.amazonaws.com/doc/2012-11-05/\"";

fn send_result() -> Response {
    Response::SendMessage(SendMessageResult {
        md5_of_message_body: "9dd4e461268c8034f5c8564e155c67a6".to_owned(),
        md5_of_message_attributes: Some("a311262e065454b75da111d535b8dacd".to_owned()),
        message_id: "5fea7756-0ea4-451a-a703-a558b933e274".to_owned(),
        ..SendMessageResult::default()
    })
}

#[test]
fn send_message_in_both_renderings() {
    assert_eq!(
        send_result().json_body(),
        r#"{"MD5OfMessageBody":"9dd4e461268c8034f5c8564e155c67a6","MD5OfMessageAttributes":"a311262e065454b75da111d535b8dacd","MessageId":"5fea7756-0ea4-451a-a703-a558b933e274"}"#
    );
    assert_eq!(
        send_result().xml_body("req-1"),
        format!(
            "<SendMessageResponse {NS}><SendMessageResult>\
             <MessageId>5fea7756-0ea4-451a-a703-a558b933e274</MessageId>\
             <MD5OfMessageBody>9dd4e461268c8034f5c8564e155c67a6</MD5OfMessageBody>\
             <MD5OfMessageAttributes>a311262e065454b75da111d535b8dacd</MD5OfMessageAttributes>\
             </SendMessageResult><ResponseMetadata><RequestId>req-1</RequestId></ResponseMetadata>\
             </SendMessageResponse>"
        )
    );
}

#[test]
fn operations_without_output_answer_an_empty_object_or_only_the_request_id() {
    let delete = Response::Empty(Action::DeleteMessage);
    assert_eq!(delete.json_body(), "{}");
    assert_eq!(
        delete.xml_body("r"),
        format!(
            "<DeleteMessageResponse {NS}><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>\
             </DeleteMessageResponse>"
        )
    );
}

#[test]
fn empty_results_omit_optional_members_and_keep_required_ones() {
    let receive = Response::ReceiveMessage(ReceiveMessageResult::default());
    assert_eq!(receive.json_body(), "{}");
    assert!(receive.xml_body("r").contains("<ReceiveMessageResult/>"));
    assert_eq!(
        Response::ListQueues(ListQueuesResult::default()).json_body(),
        "{}"
    );
    assert_eq!(
        Response::ListQueueTags(ListQueueTagsResult::default()).json_body(),
        "{}"
    );
    assert_eq!(
        Response::SendMessageBatch(SendMessageBatchResult::default()).json_body(),
        r#"{"Successful":[],"Failed":[]}"#
    );
    assert_eq!(
        Response::ListDeadLetterSourceQueues(ListDeadLetterSourceQueuesResult::default())
            .json_body(),
        r#"{"queueUrls":[]}"#
    );
}

#[test]
fn queue_attributes_are_flattened_name_value_pairs() {
    let attributes = [
        ("QueueArn", "arn:aws:sqs:us-east-1:000000000000:orders"),
        ("VisibilityTimeout", "30"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .into();
    let response = Response::GetQueueAttributes(GetQueueAttributesResult { attributes });
    assert_eq!(
        response.json_body(),
        r#"{"Attributes":{"QueueArn":"arn:aws:sqs:us-east-1:000000000000:orders","VisibilityTimeout":"30"}}"#
    );
    assert_eq!(
        response.xml_body("r"),
        format!(
            "<GetQueueAttributesResponse {NS}><GetQueueAttributesResult>\
             <Attribute><Name>QueueArn</Name><Value>arn:aws:sqs:us-east-1:000000000000:orders</Value></Attribute>\
             <Attribute><Name>VisibilityTimeout</Name><Value>30</Value></Attribute>\
             </GetQueueAttributesResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>\
             </GetQueueAttributesResponse>"
        )
    );
}

#[test]
fn list_queues_repeats_queue_url() {
    let response = Response::ListQueues(ListQueuesResult {
        queue_urls: vec!["http://h/0/a".to_owned(), "http://h/0/b".to_owned()],
        next_token: None,
    });
    assert_eq!(
        response.json_body(),
        r#"{"QueueUrls":["http://h/0/a","http://h/0/b"]}"#
    );
    assert!(response.xml_body("r").contains(
        "<ListQueuesResult><QueueUrl>http://h/0/a</QueueUrl><QueueUrl>http://h/0/b</QueueUrl></ListQueuesResult>"
    ));
}

#[test]
fn received_messages_carry_attributes_and_escape_carriage_returns() {
    let message = Message {
        message_id: "m1".to_owned(),
        receipt_handle: "h1".to_owned(),
        md5_of_body: "d".to_owned(),
        body: "{\r\n}".to_owned(),
        attributes: [("ApproximateReceiveCount".to_owned(), "1".to_owned())].into(),
        md5_of_message_attributes: Some("a311262e065454b75da111d535b8dacd".to_owned()),
        message_attributes: [
            (
                "Hello".to_owned(),
                MessageAttributeValue {
                    data_type: "String".to_owned(),
                    string_value: Some("There".to_owned()),
                    ..MessageAttributeValue::default()
                },
            ),
            (
                "Raw".to_owned(),
                MessageAttributeValue {
                    data_type: "Binary".to_owned(),
                    binary_value: Some(Blob(b"xy".to_vec())),
                    ..MessageAttributeValue::default()
                },
            ),
        ]
        .into(),
    };
    let response = Response::ReceiveMessage(ReceiveMessageResult {
        messages: vec![message],
    });
    assert_eq!(
        response.json_body(),
        r#"{"Messages":[{"MessageId":"m1","ReceiptHandle":"h1","MD5OfBody":"d","Body":"{\r\n}","Attributes":{"ApproximateReceiveCount":"1"},"MD5OfMessageAttributes":"a311262e065454b75da111d535b8dacd","MessageAttributes":{"Hello":{"DataType":"String","StringValue":"There"},"Raw":{"DataType":"Binary","BinaryValue":"eHk="}}}]}"#
    );
    assert_eq!(
        response.xml_body("r"),
        format!(
            "<ReceiveMessageResponse {NS}><ReceiveMessageResult><Message>\
             <MessageId>m1</MessageId><ReceiptHandle>h1</ReceiptHandle><MD5OfBody>d</MD5OfBody>\
             <Body>{{&#xD;\n}}</Body>\
             <Attribute><Name>ApproximateReceiveCount</Name><Value>1</Value></Attribute>\
             <MD5OfMessageAttributes>a311262e065454b75da111d535b8dacd</MD5OfMessageAttributes>\
             <MessageAttribute><Name>Hello</Name><Value><StringValue>There</StringValue><DataType>String</DataType></Value></MessageAttribute>\
             <MessageAttribute><Name>Raw</Name><Value><BinaryValue>eHk=</BinaryValue><DataType>Binary</DataType></Value></MessageAttribute>\
             </Message></ReceiveMessageResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>\
             </ReceiveMessageResponse>"
        )
    );
}

#[test]
fn batch_results_name_their_entries_per_operation() {
    let batch = BatchResult {
        successful: vec![BatchResultEntry { id: "a".to_owned() }],
        failed: vec![BatchResultErrorEntry {
            id: "b".to_owned(),
            sender_fault: true,
            code: "ReceiptHandleIsInvalid".to_owned(),
            message: Some("bad".to_owned()),
        }],
    };
    let response = Response::DeleteMessageBatch(batch.clone());
    assert_eq!(
        response.json_body(),
        r#"{"Successful":[{"Id":"a"}],"Failed":[{"Id":"b","SenderFault":true,"Code":"ReceiptHandleIsInvalid","Message":"bad"}]}"#
    );
    assert!(response.xml_body("r").contains(
        "<DeleteMessageBatchResult><DeleteMessageBatchResultEntry><Id>a</Id></DeleteMessageBatchResultEntry>\
         <BatchResultErrorEntry><Id>b</Id><SenderFault>true</SenderFault><Code>ReceiptHandleIsInvalid</Code>\
         <Message>bad</Message></BatchResultErrorEntry></DeleteMessageBatchResult>"
    ));
    let change = Response::ChangeMessageVisibilityBatch(batch).xml_body("r");
    assert!(change.contains("<ChangeMessageVisibilityBatchResultEntry><Id>a</Id></ChangeMessageVisibilityBatchResultEntry>"));
}

#[test]
fn move_tasks_carry_numbers_as_json_numbers() {
    let response = Response::ListMessageMoveTasks(ListMessageMoveTasksResult {
        results: vec![ListMessageMoveTasksResultEntry {
            status: "COMPLETED".to_owned(),
            source_arn: "arn:aws:sqs:us-east-1:000000000000:dlq".to_owned(),
            approximate_number_of_messages_moved: 3,
            approximate_number_of_messages_to_move: Some(3),
            started_timestamp: 1_700_000_000_000,
            ..ListMessageMoveTasksResultEntry::default()
        }],
    });
    assert_eq!(
        response.json_body(),
        r#"{"Results":[{"Status":"COMPLETED","SourceArn":"arn:aws:sqs:us-east-1:000000000000:dlq","ApproximateNumberOfMessagesMoved":3,"ApproximateNumberOfMessagesToMove":3,"StartedTimestamp":1700000000000}]}"#
    );
    assert!(response.xml_body("r").contains(
        "<ListMessageMoveTasksResultEntry><Status>COMPLETED</Status>\
         <SourceArn>arn:aws:sqs:us-east-1:000000000000:dlq</SourceArn>\
         <ApproximateNumberOfMessagesMoved>3</ApproximateNumberOfMessagesMoved>\
         <ApproximateNumberOfMessagesToMove>3</ApproximateNumberOfMessagesToMove>\
         <StartedTimestamp>1700000000000</StartedTimestamp></ListMessageMoveTasksResultEntry>"
    ));
}
